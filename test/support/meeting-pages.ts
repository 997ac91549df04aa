import type { Browser, Page } from "playwright-core";
import { expect } from "vitest";
import { chromiumMissing, launchWithMicrophone, microphoneClip } from "./chromium.js";
import { API_KEY } from "./server.js";
import { sharedMissing, sharedPath } from "./shared.js";
import { WAIT } from "./wait.js";

/**
 * The translated-meeting page (/meeting) in headless Chromium, as test/system/meeting.test.ts
 * (embedded room server) and test/system/meeting-livekit.test.ts (a real LiveKit server) drive it:
 * one browser per person (the fake microphone is a browser process's), each looping a clip of
 * speech in its language followed by a pause; the creator's page makes the meeting with the API key
 * typed in and hands out share links, the others open theirs.
 */

export type Language = "en" | "es" | "de";

export { WAIT };

/** Why the meeting page cannot be tested here (no Chromium, no speech in ../shared), or undefined. */
export function meetingPagesProblem(): string | undefined {
  return (
    chromiumMissing() ??
    (sharedMissing("data/speech/librivox-pocketsphinx") || sharedMissing("data/speech/fleurs-dev")
      ? "../shared speech is missing"
      : undefined)
  );
}

/**
 * One Chromium per language, each with a fake microphone looping speech in it: English real speech
 * (PocketSphinx recognizes it), Spanish and German a few seconds each (the stand-in recognizer hears
 * any audio as "speech of N ms"). The clips are written into `dir`.
 */
export async function launchPeople(dir: string): Promise<Record<Language, Browser>> {
  const [english, spanish, german] = await Promise.all([
    microphoneClip(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"), dir),
    microphoneClip(sharedPath("data/speech/fleurs-dev/fleurs-es-005.wav"), dir, { seconds: 2.5 }),
    microphoneClip(sharedPath("data/speech/fleurs-dev/fleurs-de-005.wav"), dir, { seconds: 2.5 }),
  ]);
  const [en, es, de] = await Promise.all([english, spanish, german].map(launchWithMicrophone));
  return { en: en!, es: es!, de: de! };
}

/** What the tests read of the page's elements (the test's TypeScript has no DOM types). */
export interface Element {
  readonly dataset: Record<string, string | undefined>;
  readonly textContent: string | null;
}
export interface Anchor extends Element {
  readonly href: string;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/gu, "\\$&");

/**
 * The pages the tests open in the people's browsers, with what each requested and any console error
 * or failed response (for the tests' checks on URLs and the CSP).
 */
export class MeetingPages {
  /** Every page opened and not yet closed by `closePages`. */
  pages: Page[] = [];
  readonly requested: string[] = [];
  readonly consoleErrors: string[] = [];

  /**
   * `origin`: where the service's pages are opened. `initScript`: run in every page before its own
   * scripts (the test's probes).
   */
  constructor(
    readonly browsers: Record<Language, Browser>,
    readonly origin: string,
    private readonly options: { readonly initScript?: string } = {},
  ) {}

  async open(language: Language, url: string): Promise<Page> {
    const page = await this.browsers[language].newPage({ viewport: { width: 1000, height: 900 } });
    this.pages.push(page);
    // A loaded machine may take minutes where a quiet one takes a second (no wall-clock verdicts).
    page.setDefaultTimeout(WAIT.timeout);
    if (this.options.initScript) await page.addInitScript({ content: this.options.initScript });
    page.on("request", (request) => this.requested.push(request.url()));
    page.on("websocket", (socket) => this.requested.push(socket.url()));
    page.on("console", (message) => {
      if (message.type() === "error") this.consoleErrors.push(`${language}: ${message.text()}`);
    });
    page.on("pageerror", (error) => this.consoleErrors.push(`${language}: ${error.message}`));
    page.on("response", (response) => {
      if (response.status() >= 400)
        this.consoleErrors.push(`${language}: ${response.status()} ${response.url()}`);
    });
    await page.goto(url);
    return page;
  }

  /**
   * The creator's page (the first language's browser) makes a meeting and joins it; each other
   * language's browser opens its share link and joins. Returns the pages in `languages`' order.
   */
  async meeting(languages: Language[]): Promise<Page[]> {
    const { origin } = this;
    const creator = await this.open(languages[0]!, `${origin}/meeting`);
    await creator.fill("#api-key", API_KEY);
    await creator.waitForSelector("#language-1 option[value=es]", { state: "attached" });
    for (const [index, language] of [...languages, "", "", ""].slice(0, 4).entries())
      await creator.selectOption(`#language-${index}`, language);
    await creator.selectOption("#voice", "female");
    await creator.click("#create-meeting");
    const links = creator.locator("#links .share-link");
    await expect.poll(() => links.count(), WAIT).toBe(languages.length - 1);
    const invitations = await links.evaluateAll((anchors) =>
      anchors.map((a) => ({
        language: (a as unknown as Anchor).dataset.language,
        href: (a as unknown as Anchor).href,
      })),
    );
    expect(invitations.map((link) => link.language)).toEqual(languages.slice(1));
    for (const { href } of invitations) {
      // A short invitation in the fragment (the service gives the room's address and a fresh token
      // when it is opened, on LiveKit too); never the API key.
      expect(href).toMatch(new RegExp(`^${escapeRegExp(origin)}/meeting#join=[A-Za-z0-9_-]{20,60}$`, "u"));
      expect(href).not.toContain(API_KEY);
    }
    const others = await Promise.all(
      invitations.map(({ href, language }) => this.open(language as Language, href)),
    );
    const all = [creator, ...others];
    for (const page of all) await page.click("#join");
    for (const page of all) await page.locator("body[data-state=joined]").waitFor({ timeout: WAIT.timeout });
    return all;
  }

  async closePages(): Promise<void> {
    await Promise.all(this.pages.map((page) => page.close()));
    this.pages = [];
  }
}

export const identityOf = (page: Page) => page.getAttribute("body", "data-identity") as Promise<string>;

export interface Caption {
  kind: string;
  participant: string;
  language: string;
  final: boolean;
  text: string;
}

export const captionsOf = (page: Page): Promise<Caption[]> =>
  page.locator("#captions .caption").evaluateAll((lines) =>
    lines.map((line) => {
      const { kind, participant, language, final } = (line as unknown as Element).dataset;
      return { kind, participant, language, final: final === "true", text: line.textContent } as never;
    }),
  );

/** The original captions of `participant`'s speech (interim and final). */
export const originalsOf = async (page: Page, participant: string) =>
  (await captionsOf(page)).filter((c) => c.participant === participant && c.kind === "original");

export const finalsFrom = async (page: Page, participant: string, kind: "original" | "translated") =>
  (await captionsOf(page)).filter((c) => c.participant === participant && c.kind === kind && c.final).length;

/**
 * Once `muted` is muted, `listener` shows no more of their speech while `speaker` goes on: returns
 * how many original captions of `muted` it shows. What `muted` said before muting may still be on
 * its way (a loaded machine holds seconds of their audio in their pipeline while the speaker's goes
 * on), so the captions are taken once they have not changed, none of them open, over two of the
 * speaker's utterances, and must then stay so over two more. If muting failed they would never stop
 * changing (this gives up after ten tries).
 */
export async function expectSilencedByMute(listener: Page, muted: string, speaker: string): Promise<number> {
  const speakerSays = async (utterances: number) => {
    const from = await finalsFrom(listener, speaker, "original");
    await expect
      .poll(() => finalsFrom(listener, speaker, "original"), WAIT)
      .toBeGreaterThanOrEqual(from + utterances);
  };
  let whileMuted = -1;
  for (let tries = 0; tries < 10; tries += 1) {
    const then = (await originalsOf(listener, muted)).length;
    await speakerSays(2);
    const now = await originalsOf(listener, muted);
    if (now.length === then && !now.some((caption) => !caption.final)) {
      whileMuted = then;
      break;
    }
  }
  expect(whileMuted, "the muted participant's captions settle").toBeGreaterThan(0);
  await speakerSays(2);
  expect((await originalsOf(listener, muted)).length).toBe(whileMuted);
  return whileMuted;
}

/** The identities in the page's list of participants. */
export const listedOf = (page: Page) =>
  page
    .locator("#participants li")
    .evaluateAll((items) => items.map((i) => (i as unknown as Element).dataset.identity));

/**
 * Each page, once it has heard every other participant (their original captions, labelled with
 * them, and their translation), shows translations into its own language only, none of its own
 * speech, and has played translated speech (`hearsSpeech` waits for that, as the room delivers it).
 */
export async function expectEachHearsTheOthersInTheirLanguage(
  pages: Page[],
  languages: Language[],
  hearsSpeech: (page: Page, language: Language) => Promise<void>,
): Promise<void> {
  const identities = await Promise.all(pages.map(identityOf));
  await Promise.all(
    pages.map(async (page, i) => {
      for (const [j, other] of identities.entries()) {
        if (j === i) continue;
        await expect.poll(() => finalsFrom(page, other, "translated"), WAIT).toBeGreaterThan(0);
        await expect.poll(() => finalsFrom(page, other, "original"), WAIT).toBeGreaterThan(0);
      }
      await hearsSpeech(page, languages[i]!);
    }),
  );
  for (const [i, page] of pages.entries()) {
    const captions = await captionsOf(page);
    const translated = captions.filter((c) => c.kind === "translated");
    const where = `${languages[i]}'s page`;
    // Into this page's language only, never of its own speech.
    expect(
      translated.filter((c) => c.language !== languages[i]),
      where,
    ).toEqual([]);
    expect(
      translated.filter((c) => c.participant === identities[i]),
      where,
    ).toEqual([]);
    expect(
      translated.every((c) => identities.includes(c.participant)),
      where,
    ).toBe(true);
    // Originals are labelled with their speaker, in the speaker's language.
    for (const [j, other] of identities.entries()) {
      const originals = captions.filter((c) => c.kind === "original" && c.participant === other && c.final);
      expect(
        originals.every((c) => c.language === languages[j]),
        where,
      ).toBe(true);
    }
    // The participants' list: everyone, this page as "You".
    const listed = await page
      .locator("#participants li")
      .evaluateAll((items) =>
        items.map((item) => [(item as unknown as Element).dataset.identity, item.textContent]),
      );
    expect(listed.map(([identity]) => identity).sort(), where).toEqual([...identities].sort());
    expect(listed.find(([identity]) => identity === identities[i])?.[1], where).toBe("You");
  }
}

/**
 * The creator ended the meeting: every page says so — the creator's that they did, the others' why
 * — and offers a new meeting, nothing else.
 */
export async function expectEndedByCreator(creator: Page, others: Page[]): Promise<void> {
  for (const page of [creator, ...others]) {
    await page.locator("body[data-state=ended]").waitFor({ timeout: WAIT.timeout });
    expect(await page.textContent("#status")).toBe(
      page === creator
        ? "You ended the meeting."
        : "This meeting has ended: the person who created it ended it.",
    );
    expect(await page.isVisible("#join")).toBe(false);
    expect(await page.isVisible("#new-meeting")).toBe(true);
  }
}
