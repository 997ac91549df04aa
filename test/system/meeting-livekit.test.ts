/**
 * The translated-meeting page (/meeting) end to end on a real LiveKit server (the pinned build the
 * global setup starts on loopback: test/support/servers.ts): the real service configured with
 * LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET, opened at localhost in one headless Chromium
 * per person, each with a fake microphone looping speech in its language. The pages join through
 * livekit-client over WebRTC (loopback ICE candidates), publish their microphones, subscribe to the
 * translator's track of their language and read its `transcript` data messages. The engines are
 * meeting.test.ts's (test/support/multilingual-engines.ts). One meeting in English, Spanish and
 * German serves the tests in order: captions and speech, a forged caption, then mute, leave and end.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Room } from "@livekit/rtc-node";
import { AccessToken } from "livekit-server-sdk";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  captionsOf,
  expectEachHearsTheOthersInTheirLanguage,
  expectEndedByCreator,
  expectSilencedByMute,
  finalsFrom,
  identityOf,
  launchPeople,
  listedOf,
  MeetingPages,
  meetingPagesProblem,
  WAIT,
  type Language,
} from "../support/meeting-pages.js";
import { multilingualEngines } from "../support/multilingual-engines.js";
import type { OpenAiTestServer } from "../support/openai-server.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { testLiveKit, type TestLiveKit } from "../support/servers.js";

const livekit = testLiveKit();
const problem = "problem" in livekit ? livekit.problem : meetingPagesProblem();
if (problem) console.warn(`meeting page on a real LiveKit server not tested: ${problem}`);

const LANGUAGES: Language[] = ["en", "es", "de"];
/** In the forged caption: the pages receive it (their data channels carry it) but must not show it. */
const FORGED = "Send the money to Mallory";

/**
 * Runs in every page before its scripts: watches the page's WebRTC connections (livekit-client's),
 * counting the data messages that carry the forged caption, and says what the page hears on the
 * audio elements livekit-client attached: the inbound audio's energy (WebRTC's statistics) on the
 * tracks those elements play.
 */
const PROBE = `(() => {
  const probe = { forged: 0, connections: [] };
  Object.defineProperty(window, "__meetingProbe", { value: probe });
  const Native = window.RTCPeerConnection;
  const decoder = new TextDecoder();
  const watch = (channel) =>
    channel.addEventListener("message", async ({ data }) => {
      const bytes = data instanceof Blob ? await data.arrayBuffer() : data;
      const text = typeof bytes === "string" ? bytes : decoder.decode(bytes);
      if (text.includes(${JSON.stringify(FORGED)})) probe.forged += 1;
    });
  window.RTCPeerConnection = class extends Native {
    constructor(...args) {
      super(...args);
      probe.connections.push(this);
      this.addEventListener("datachannel", ({ channel }) => watch(channel));
    }
    createDataChannel(...args) {
      const channel = super.createDataChannel(...args);
      watch(channel);
      return channel;
    }
  };
  probe.heard = async () => {
    const elements = [...document.querySelectorAll("audio")];
    const tracks = elements.flatMap((element) =>
      element.srcObject ? element.srcObject.getAudioTracks().map((track) => track.id) : [],
    );
    let energy = 0;
    for (const connection of probe.connections) {
      if (connection.connectionState === "closed") continue;
      (await connection.getStats()).forEach((report) => {
        if (report.type === "inbound-rtp" && report.kind === "audio" && tracks.includes(report.trackIdentifier))
          energy += report.totalAudioEnergy ?? 0;
      });
    }
    return { track: document.body.dataset.audioTrack ?? "", elements: elements.length, energy };
  };
})();`;

interface Heard {
  /** body[data-audio-track]: the translator's track the page chose. */
  track: string;
  /** Audio elements in the page (livekit-client attaches one per subscribed track). */
  elements: number;
  /** The inbound audio energy of the tracks they play. */
  energy: number;
}

const heardBy = (page: Page) => page.evaluate("window.__meetingProbe.heard()") as Promise<Heard>;
const forgedSeenBy = (page: Page) => page.evaluate("window.__meetingProbe.forged") as Promise<number>;

/** LiveKit: the page plays its language's track of the translator, one audio element, and it is sound. */
async function playsItsLanguagesTrack(page: Page, language: Language): Promise<void> {
  await expect.poll(() => heardBy(page).then((heard) => heard.energy), WAIT).toBeGreaterThan(0);
  expect(await heardBy(page)).toMatchObject({ track: `translated-audio-${language}`, elements: 1 });
}

let remote: OpenAiTestServer;
let server: TestServer;
let dir: string;
let people: MeetingPages;
/** The meeting of the tests, in LANGUAGES' order (made by the first). */
let pages: Page[] = [];
let mallory: Room | undefined;
/** How many console errors the pages had logged when the meeting was ended. */
let errorsBeforeEnd: number | undefined;
/**
 * What livekit-client logs as errors when the server deletes the room under it (the end of the
 * meeting): its data channels' closing. Nothing of the page's.
 */
const ROOM_DELETED_NOISE =
  /^\w+: (DataChannel error on \w+: User-Initiated Abort|publisher data channel '\w+' closed unexpectedly)\b/u;

describe.skipIf(problem !== undefined)("the meeting page on a real LiveKit server", () => {
  const target = livekit as TestLiveKit;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "relay-meeting-livekit-"));
    const engines = await multilingualEngines(dir);
    remote = engines.remote;
    let browsers;
    [server, browsers] = await Promise.all([
      startServer({
        PUBLIC_BASE_URL: "",
        ENGINES_FILE: engines.enginesFile,
        RATE_LIMIT_PER_MINUTE: "1000",
        LIVEKIT_URL: target.url,
        LIVEKIT_API_KEY: target.apiKey,
        LIVEKIT_API_SECRET: target.apiSecret,
      }),
      launchPeople(dir),
    ]);
    // As a new user opens it: localhost (LIVEKIT_URL is another origin, which the CSP allows).
    people = new MeetingPages(browsers, server.baseUrl.replace("127.0.0.1", "localhost"), {
      initScript: PROBE,
    });
  });
  afterAll(async () => {
    // Before the service closes: its back-end releases the native runtime Mallory's room shares.
    await mallory?.disconnect().catch(() => undefined);
    await people?.closePages();
    await Promise.all(Object.values(people?.browsers ?? {}).map((browser) => browser.close()));
    await server?.close();
    await remote?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("three pages, English, Spanish and German: each shows the others' captions in its language and plays its language's track", async () => {
    pages = await people.meeting(LANGUAGES);
    await expectEachHearsTheOthersInTheirLanguage(pages, LANGUAGES, playsItsLanguagesTrack);
    const [en, es, de] = pages as [Page, Page, Page];
    // English through Apertium reaches Bruno in Spanish (which words PocketSphinx hears over WebRTC
    // depends on the machine's load: Opus on a starved CPU); German is the stand-in's.
    const finals = async (page: Page) =>
      (await captionsOf(page)).filter((c) => c.kind === "translated" && c.final).map((c) => c.text);
    expect((await finals(es)).join(" ").trim().length).toBeGreaterThan(0);
    expect((await finals(de)).every((text) => /\[German\]/u.test(text))).toBe(true);
    // Who is speaking, as LiveKit's active speakers say.
    const bruno = await identityOf(es);
    await expect
      .poll(async () => (await en.getAttribute("#speaking", "data-identities"))?.split(" "), WAIT)
      .toContain(bruno);
    expect(await en.textContent("#participants")).toMatch(/Participant [0-9a-f]{4} \(es\)/u);
  });

  it("trusts only the translator: a forged caption from another app's participant reaches the pages and is not shown", async () => {
    expect(pages, "the first test's meeting").toHaveLength(LANGUAGES.length);
    const alice = await identityOf(pages[0]!);
    const room = (await pages[1]!.getAttribute("body", "data-room"))!;
    // Another app on the same LiveKit server, with its key and secret, may let its users publish
    // data: Mallory's token does (the service's own tokens never do).
    const token = new AccessToken(target.apiKey, target.apiSecret, { identity: "another-app-mallory" });
    token.addGrant({ roomJoin: true, room, canPublish: true, canSubscribe: true, canPublishData: true });
    const rtc = await import("@livekit/rtc-node");
    mallory = new rtc.Room();
    await mallory.connect(target.url, await token.toJwt(), { autoSubscribe: false, dynacast: false });
    for (const page of pages) await expect.poll(() => listedOf(page), WAIT).toContain("another-app-mallory");
    const before = await Promise.all(pages.map((page) => finalsFrom(page, alice, "original")));
    const forged = (language: Language) =>
      new TextEncoder().encode(
        JSON.stringify({
          type: "translated_transcript",
          text: `${FORGED} (${language})`,
          translated_text: `${FORGED} (${language})`,
          original_text: FORGED,
          correlation_id: "forged-1",
          is_final: true,
          source_language: "en",
          target_language: language,
          language,
          participant: alice,
          start_ms: 0,
          end_ms: 1000,
        }),
      );
    // Its original first, as the translator sends them (a page shows no translation of an original it
    // never saw: the forgery must pass that rule to test this one).
    const original = new TextEncoder().encode(
      JSON.stringify({
        type: "original_transcript",
        text: FORGED,
        correlation_id: "forged-1",
        is_final: true,
        language: "en",
        participant: alice,
        start_ms: 0,
        end_ms: 1000,
      }),
    );
    await mallory.localParticipant!.publishData(original, { reliable: true, topic: "transcript" });
    for (const language of LANGUAGES)
      await mallory.localParticipant!.publishData(forged(language), { reliable: true, topic: "transcript" });
    // Every page received it (LiveKit delivered it to them)...
    for (const page of pages) await expect.poll(() => forgedSeenBy(page), WAIT).toBe(LANGUAGES.length + 1);
    // ...and, while the translator's captions go on, shows none of it.
    for (const [i, page] of pages.entries()) {
      await expect.poll(() => finalsFrom(page, alice, "original"), WAIT).toBeGreaterThan(before[i]!);
      expect((await captionsOf(page)).filter((c) => c.text.includes(FORGED))).toEqual([]);
      expect(await page.textContent("body")).not.toContain(FORGED);
    }
    await mallory.disconnect();
    mallory = undefined;
    for (const page of pages)
      await expect.poll(() => listedOf(page), WAIT).not.toContain("another-app-mallory");
  });

  it("mute and unmute: a muted participant is heard no more, then again", async () => {
    expect(pages, "the first test's meeting").toHaveLength(LANGUAGES.length);
    const [alice, bruno, clara] = pages as [Page, Page, Page];
    const [b, c] = await Promise.all([identityOf(bruno), identityOf(clara)]);

    // Muted, Bruno is heard no more: Clara goes on speaking while his captions on Alice's page stop
    // (test/support/meeting-pages.ts).
    await bruno.click("#mute");
    expect(await bruno.getAttribute("#mute", "aria-pressed")).toBe("true");
    await expectSilencedByMute(alice, b, c);
    // Unmuted, he is heard again.
    const brunoMuted = await finalsFrom(alice, b, "original");
    await bruno.click("#mute");
    expect(await bruno.getAttribute("#mute", "aria-pressed")).toBe("false");
    await expect.poll(() => finalsFrom(alice, b, "original"), WAIT).toBeGreaterThan(brunoMuted);
  });

  // Its own test (and test timeout): on a loaded machine the mute check alone may take minutes.
  it("leave and come back, and the end of the meeting for every page", async () => {
    expect(pages, "the first test's meeting").toHaveLength(LANGUAGES.length);
    const [alice, bruno, clara] = pages as [Page, Page, Page];
    const [b, c] = await Promise.all([identityOf(bruno), identityOf(clara)]);

    // Clara leaves: the others see her go.
    await clara.click("#leave");
    await clara.locator("body[data-state=left]").waitFor({ timeout: WAIT.timeout });
    expect(await clara.textContent("#status")).toBe("You left the meeting.");
    await expect.poll(() => listedOf(alice), WAIT).not.toContain(c);
    await expect.poll(() => listedOf(bruno), WAIT).not.toContain(c);
    // She comes back with her link, and hears the others again in German.
    await clara.click("#join");
    await clara.locator("body[data-state=joined]").waitFor({ timeout: WAIT.timeout });
    await expect.poll(() => listedOf(alice), WAIT).toContain(c);
    await expect.poll(() => finalsFrom(clara, b, "translated"), WAIT).toBeGreaterThan(0);

    // The creator ends the meeting: every page in it says so.
    errorsBeforeEnd = people.consoleErrors.length;
    await alice.click("#end");
    await expectEndedByCreator(
      alice,
      pages.filter((page) => page !== alice),
    );
  });

  it("never puts the API key in a URL, reaches only the page's origin and LiveKit, and logs no error of its own", () => {
    expect(people.requested.length).toBeGreaterThan(5);
    expect(people.requested.filter((url) => url.includes(API_KEY))).toEqual([]);
    const hosts = [new URL(people.origin).host, new URL(target.url).host];
    expect(
      people.requested.filter((url) => /^(https?|wss?):/u.test(url) && !hosts.includes(new URL(url).host)),
    ).toEqual([]);
    expect(people.requested.some((url) => url.startsWith(`${target.url}/rtc`))).toBe(true);
    const afterEnd = people.consoleErrors.slice(errorsBeforeEnd ?? Infinity);
    expect([
      ...people.consoleErrors.slice(0, errorsBeforeEnd),
      ...afterEnd.filter((error) => !ROOM_DELETED_NOISE.test(error)),
    ]).toEqual([]);
  });
});
