/**
 * A meeting's life on the meeting page (/meeting) in headless Chromium, as its people live it: the
 * creator makes it and waits (well past ROOM_EMPTY_TIMEOUT_SEC: their open page keeps it open),
 * reloads the page (the meeting comes back, the API key does not), a Spanish participant opens
 * their link, is told plainly that nobody will hear them (no Spanish recognizer among the embedded
 * engines), joins with a name, is pushed out by a second tab, comes back after their first token
 * expired, and the creator ends it: every page says why and offers only a new meeting.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumMissing, launchWithMicrophone, microphoneClip } from "../support/chromium.js";
import { identityOf, listedOf, WAIT } from "../support/meeting-pages.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

const problem =
  chromiumMissing() ?? (sharedMissing("data/speech/librivox-pocketsphinx") ? "no speech" : undefined);
if (problem) console.warn(`meeting links not tested in Chromium: ${problem}`);

/** Short, so the participant comes back after their first token expired. */
const TOKEN_TTL_SEC = 10;
/** Short, so waiting for people outlasts it. */
const EMPTY_TIMEOUT_SEC = 3;

let server: TestServer;
let dir: string;
let origin: string;
const browsers: Browser[] = [];

beforeAll(async () => {
  if (problem) return;
  dir = await mkdtemp(path.join(tmpdir(), "relay-meeting-links-"));
  const clip = await microphoneClip(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"), dir);
  let english: Browser;
  let spanish: Browser;
  [server, english, spanish] = await Promise.all([
    startServer({
      PUBLIC_BASE_URL: "",
      ROOM_TOKEN_TTL_SEC: String(TOKEN_TTL_SEC),
      ROOM_EMPTY_TIMEOUT_SEC: String(EMPTY_TIMEOUT_SEC),
      RATE_LIMIT_PER_MINUTE: "1000",
    }),
    launchWithMicrophone(clip),
    launchWithMicrophone(clip),
  ]);
  browsers.push(english, spanish);
  origin = server.baseUrl.replace("127.0.0.1", "localhost");
});
afterAll(async () => {
  await Promise.all(browsers.map((browser) => browser.close()));
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function open(browser: Browser, url: string): Promise<Page> {
  const page = await browser.newPage();
  // A loaded machine may take minutes where a quiet one takes a second (no wall-clock verdicts).
  page.setDefaultTimeout(WAIT.timeout);
  await page.goto(url);
  return page;
}

const statusOf = (page: Page) => page.textContent("#status");

describe.skipIf(problem !== undefined)("a meeting's links in Chromium", () => {
  it("create, wait, reload, a listen-only participant with a name, a second tab, back after the token expired, end", async () => {
    const [english, spanish] = browsers as [Browser, Browser];
    const creator = await open(english, `${origin}/meeting`);
    await creator.fill("#api-key", API_KEY);
    await creator.waitForSelector("#language-1 option[value=es]", { state: "attached" });
    await creator.selectOption("#language-0", "en");
    await creator.selectOption("#language-1", "es");
    await creator.selectOption("#voice", "female");
    // What the server's operator could do is theirs: the page's words for people say none of it.
    expect(await creator.textContent("#status")).not.toMatch(/npx|models pull|restart/u);
    await creator.click("#create-meeting");
    const link = creator.locator("#links .share-link");
    await link.waitFor();
    const href = (await link.getAttribute("href"))!;
    expect(href).toMatch(/^http:\/\/localhost:\d+\/meeting#join=[A-Za-z0-9_-]{20,60}$/u);
    expect(await statusOf(creator)).toMatch(
      /Spanish \(es\): these participants hear the others but nobody hears them/u,
    );

    // Nobody joins for a while: the creator's open page keeps the meeting open.
    await sleep(2 * EMPTY_TIMEOUT_SEC * 1000);
    // The creator reloads: the meeting, its link and End come back; the API key is asked again.
    await creator.reload();
    await creator.locator("#links .share-link").waitFor();
    expect(await creator.getAttribute("#links .share-link", "href")).toBe(href);
    expect(await creator.isVisible("#owner-key")).toBe(true);
    expect(await creator.inputValue("#owner-key")).toBe("");
    expect(await statusOf(creator)).toMatch(/Back in your meeting/u);

    // Bruno opens his link: told plainly, before joining, that nobody will hear him.
    const bruno = await open(spanish, href);
    await bruno.locator("#listen-only").waitFor();
    expect(await bruno.textContent("#listen-only")).toMatch(
      /^Nobody will hear you: this server cannot recognize Spanish/u,
    );
    await bruno.fill("#name", "Bruno <b>B</b>");
    await bruno.click("#join");
    await bruno.locator("body[data-state=joined]").waitFor({ timeout: WAIT.timeout });
    const joinedAt = Date.now();
    expect(await bruno.isVisible("#listen-only")).toBe(true);
    const b = await identityOf(bruno);

    // The creator's room connection passes through the test, which can add a frame of its own.
    let toCreator: ((frame: string) => void) | undefined;
    await creator.routeWebSocket(/\/rooms\//u, (socket) => {
      socket.connectToServer();
      toCreator = (frame) => socket.send(frame);
    });
    await creator.fill("#name", "Alice");
    await creator.click("#join");
    await creator.locator("body[data-state=joined]").waitFor({ timeout: WAIT.timeout });
    // A translation of something said before this page joined (its original never reached it) is
    // not shown as if it were what was said; one whose original it shows is.
    const translation = (id: string) =>
      JSON.stringify({
        type: "translated_transcript",
        text: `translation ${id}`,
        is_final: true,
        correlation_id: id,
        participant: b,
        language: "en",
      });
    toCreator!(translation("said-before-joining"));
    toCreator!(
      JSON.stringify({
        type: "original_transcript",
        text: "dicho",
        is_final: true,
        correlation_id: "said-after",
        participant: b,
        language: "es",
      }),
    );
    toCreator!(translation("said-after"));
    await expect.poll(() => creator.textContent("#captions"), WAIT).toContain("translation said-after");
    expect(await creator.textContent("#captions")).not.toContain("said-before-joining");
    // Each sees the other by name and language, as text (the markup Bruno typed is not markup).
    await expect.poll(() => creator.textContent("#participants"), WAIT).toContain("Bruno <b>B</b> (es)");
    await expect.poll(() => bruno.textContent("#participants"), WAIT).toContain("Alice (en)");
    expect(await creator.locator("#participants b").count()).toBe(0);

    // A second tab with Bruno's link takes his place; the first says so.
    const second = await open(spanish, href);
    await second.locator("#listen-only").waitFor();
    await second.click("#join");
    await second.locator("body[data-state=joined]").waitFor({ timeout: WAIT.timeout });
    await bruno.locator("body[data-state=left]").waitFor({ timeout: WAIT.timeout });
    expect(await statusOf(bruno)).toBe("You joined this meeting from another tab or device.");
    await second.close();
    await expect.poll(() => listedOf(creator), WAIT).not.toContain(b);

    // Once the first token he was given has expired, his link still brings him back as himself.
    await sleep(Math.max(0, joinedAt + (TOKEN_TTL_SEC + 2) * 1000 - Date.now()));
    await bruno.click("#join");
    await bruno.locator("body[data-state=joined]").waitFor({ timeout: WAIT.timeout });
    expect(await identityOf(bruno)).toBe(b);
    await expect.poll(() => listedOf(creator), WAIT).toContain(b);

    // The creator ends it, with the API key typed again: each page says why, and offers a new meeting only.
    await creator.click("#end");
    expect(await statusOf(creator)).toMatch(/type the API key again/u);
    await creator.fill("#owner-key", API_KEY);
    await creator.click("#end");
    await creator.locator("body[data-state=ended]").waitFor({ timeout: WAIT.timeout });
    expect(await statusOf(creator)).toBe("You ended the meeting.");
    await bruno.locator("body[data-state=ended]").waitFor({ timeout: WAIT.timeout });
    expect(await statusOf(bruno)).toBe("This meeting has ended: the person who created it ended it.");
    for (const page of [creator, bruno]) {
      for (const control of ["#join", "#leave", "#end", "#add-link", "#listen-only"])
        expect(await page.isVisible(control), control).toBe(false);
      expect(await page.isVisible("#new-meeting")).toBe(true);
    }
    // The ended meeting is not brought back by a reload: a new one can be made.
    await creator.reload();
    await creator.locator("#create-meeting").waitFor();
    expect(await creator.isVisible("#links")).toBe(false);
  });
});
