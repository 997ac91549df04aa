/**
 * The translated-meeting page (/meeting) end to end: one headless Chromium per person (the fake
 * microphone is a browser process's), each looping a clip of speech in its language followed by a
 * pause, against the real service on the embedded room server, opened at localhost with no
 * PUBLIC_BASE_URL as a new user runs it. The creator's page makes the meeting with the API key
 * typed in, hands out share links and joins; the others open their link. English is real speech
 * through PocketSphinx and Apertium; Spanish and German are heard by the protocol-faithful
 * OpenAI-compatible stand-in (no Spanish or German recognizer runs offline here), which also
 * translates from and into German, tagging its answer with the language asked for; eSpeak NG
 * speaks every language. What each page shows is what the server sent it: the page filters
 * nothing, so these tests see the server's routing.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Duplex } from "node:stream";
import { gunzipSync } from "node:zlib";
// livekit-client's wire protocol (a dependency of livekit-client and livekit-server-sdk), to read its join request.
import { JoinRequest, WrappedJoinRequest, WrappedJoinRequest_Compression } from "@livekit/protocol";
import type { Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
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
} from "../support/meeting-pages.js";
import { PROJECT_ROOT } from "../support/run-script.js";
import { multilingualEngines } from "../support/multilingual-engines.js";
import type { OpenAiTestServer } from "../support/openai-server.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { inviteLink, tokenLink } from "../../src/playground/meeting-logic.js";

const problem = meetingPagesProblem();
if (problem) console.warn(`meeting page not tested: ${problem}`);

let remote: OpenAiTestServer;
let server: TestServer;
let dir: string;
let origin: string;
/** The people's browsers and every page a test opened (closed after it). */
let people: MeetingPages;

beforeAll(async () => {
  if (problem) return;
  dir = await mkdtemp(path.join(tmpdir(), "relay-meeting-"));
  const engines = await multilingualEngines(dir);
  remote = engines.remote;
  const enginesFile = engines.enginesFile;
  let browsers;
  [server, browsers] = await Promise.all([
    startServer({ PUBLIC_BASE_URL: "", ENGINES_FILE: enginesFile, RATE_LIMIT_PER_MINUTE: "1000" }),
    launchPeople(dir),
  ]);
  // As a new user opens it: localhost, which every URL the page reaches must follow (its CSP).
  origin = server.baseUrl.replace("127.0.0.1", "localhost");
  people = new MeetingPages(browsers, origin);
});
afterEach(async () => {
  await people?.closePages();
});
afterAll(async () => {
  await Promise.all(Object.values(people?.browsers ?? {}).map((browser) => browser.close()));
  await server?.close();
  await remote?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const audioSamples = async (page: Page) => Number(await page.getAttribute("body", "data-audio-samples"));

/** Embedded rooms: the page has played translated speech the server sent it. */
const playsSpeech = async (page: Page) => {
  await expect.poll(() => audioSamples(page), WAIT).toBeGreaterThan(0);
};

/** `auto_subscribe` of a LiveKit signalling request: a query parameter (protocol v0) or in `join_request` (v1). */
function autoSubscribeOf(query: URLSearchParams): boolean | undefined {
  const plain = query.get("auto_subscribe");
  if (plain !== null) return plain === "1";
  const wrapped = WrappedJoinRequest.fromBinary(Buffer.from(query.get("join_request")!, "base64url"));
  const bytes =
    wrapped.compression === WrappedJoinRequest_Compression.GZIP
      ? gunzipSync(wrapped.joinRequest)
      : wrapped.joinRequest;
  return JoinRequest.fromBinary(bytes).connectionSettings?.autoSubscribe;
}

describe.skipIf(problem !== undefined)("the meeting page in Chromium", () => {
  it("two people, English and Spanish: each hears the other in their own language, never themselves", async () => {
    const pages = await people.meeting(["en", "es"]);
    await expectEachHearsTheOthersInTheirLanguage(pages, ["en", "es"], playsSpeech);
    const [en, es] = pages as [Page, Page];
    // English through Apertium: Alice's words reach Bruno in Spanish. (Her fake microphone loops
    // her clip; a starved browser can garble one pass of it, so her words are waited for.)
    const toBruno = async () =>
      (await captionsOf(es))
        .filter((c) => c.kind === "translated" && c.final)
        .map((c) => c.text)
        .join(" ");
    await expect.poll(toBruno, WAIT).toMatch(/frente|adelante|diez|metros/iu);
    // Who is speaking: each page sees the other speak.
    const bruno = await identityOf(es);
    await expect
      .poll(async () => (await en.getAttribute("#speaking", "data-identities"))?.split(" "), WAIT)
      .toContain(bruno);
    expect(await en.textContent("#participants")).toMatch(/Participant [0-9a-f]{4} \(es\)/u);
  });

  it("three people, English, Spanish and German: each sees the others in their own language only", async () => {
    const pages = await people.meeting(["en", "es", "de"]);
    await expectEachHearsTheOthersInTheirLanguage(pages, ["en", "es", "de"], playsSpeech);
    // German is the stand-in's: tagged with the language it was asked for.
    const toClara = (await captionsOf(pages[2]!)).filter((c) => c.kind === "translated" && c.final);
    expect(toClara.every((c) => /\[German\]/u.test(c.text))).toBe(true);
    // Into docs/ with RELAY_UPDATE_SCREENSHOTS=1 (how docs/meeting.png is made), else a temporary directory.
    await pages[1]!.screenshot({
      path: path.join(
        process.env.RELAY_UPDATE_SCREENSHOTS ? path.join(PROJECT_ROOT, "docs") : dir,
        "meeting.png",
      ),
    });
  });

  it("mute, leave, a closed page, and the end of the meeting for every page", async () => {
    const [alice, bruno, clara] = (await people.meeting(["en", "es", "de"])) as [Page, Page, Page];
    const [b, c] = await Promise.all([identityOf(bruno), identityOf(clara)]);
    // Alice hears both before anything changes.
    await expect.poll(() => finalsFrom(alice, b, "original"), WAIT).toBeGreaterThan(0);
    await expect.poll(() => finalsFrom(alice, c, "original"), WAIT).toBeGreaterThan(0);

    // Muted, Bruno is heard no more: Clara goes on speaking while his captions on Alice's page stop
    // (test/support/meeting-pages.ts).
    await bruno.click("#mute");
    expect(await bruno.getAttribute("#mute", "aria-pressed")).toBe("true");
    await expectSilencedByMute(alice, b, c);
    // Unmuted, he is heard again.
    const brunoMuted = await finalsFrom(alice, b, "original");
    await bruno.click("#mute");
    await expect.poll(() => finalsFrom(alice, b, "original"), WAIT).toBeGreaterThan(brunoMuted);

    // Clara leaves: the others see her go.
    await clara.click("#leave");
    await clara.locator("body[data-state=left]").waitFor();
    expect(await clara.textContent("#status")).toBe("You left the meeting.");
    await expect.poll(() => listedOf(alice), WAIT).not.toContain(c);
    await expect.poll(() => listedOf(bruno), WAIT).not.toContain(c);
    // Bruno closes his tab: freed too.
    await bruno.close();
    await expect.poll(() => listedOf(alice), WAIT).toEqual([await identityOf(alice)]);
    // Clara comes back with her link.
    await clara.click("#join");
    await clara.locator("body[data-state=joined]").waitFor({ timeout: WAIT.timeout });
    await expect.poll(() => listedOf(alice), WAIT).toContain(c);

    // The creator ends the meeting: every page in it says so.
    await alice.click("#end");
    await expectEndedByCreator(alice, [clara]);
  });

  it("says why a link does not let the page in", async () => {
    const errorsBefore = people.consoleErrors.length;
    // A token link made by hand, with a forged token: the refused handshake says why.
    const forged = tokenLink(origin, { room: "api-00000000000000000000", token: "forged", language: "es" });
    const page = await people.open("es", forged);
    await page.click("#join");
    await page.locator("body[data-state=failed]").waitFor({ timeout: WAIT.timeout });
    expect(await page.textContent("#status")).toMatch(/^Could not join: .+\. Ask for a new link\.$/u);
    expect(await page.isEnabled("#join")).toBe(true);
    // A share link this service never made: said at once, and nothing to join.
    const made = await people.open("es", inviteLink(origin, "AQE" + "x".repeat(40)));
    await made.locator("body[data-state=ended]").waitFor({ timeout: WAIT.timeout });
    expect(await made.textContent("#status")).toMatch(/^This link does not open a meeting: /u);
    expect(await made.isVisible("#join")).toBe(false);
    expect(await made.isVisible("#new-meeting")).toBe(true);
    // A link whose LiveKit server is a script, not a web address: refused, never "Joining…" forever.
    const scripted = await people.open(
      "es",
      tokenLink(origin, { room: "api-1", token: "t", language: "es", livekit: "javascript:alert(1)" }),
    );
    expect(await scripted.textContent("#status")).toMatch(/not a web address/u);
    expect(await scripted.isVisible("#join")).toBe(false);
    people.consoleErrors.length = errorsBefore; // the refused handshake's own errors, and the 404
  });

  it("joins LiveKit through livekit-client when the link names a LiveKit server (the CSP allows LIVEKIT_URL)", async () => {
    // No LiveKit server runs here: a stand-in refuses every connection, and records how it was asked.
    const asked: string[] = [];
    const livekit = createServer((request, response) => {
      asked.push(`GET ${request.url}`);
      response.writeHead(401, { "access-control-allow-origin": "*", "content-type": "text/plain" });
      response.end("invalid token");
    });
    livekit.on("upgrade", (request: IncomingMessage, socket: Duplex) => {
      asked.push(`UPGRADE ${request.url}`);
      socket.end("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n");
    });
    await new Promise<void>((resolve) => livekit.listen(0, "127.0.0.1", resolve));
    const [requestedBefore, errorsBefore] = [people.requested.length, people.consoleErrors.length];
    const livekitUrl = `ws://localhost:${(livekit.address() as AddressInfo).port}`;
    const withLiveKit = await startServer(
      {
        PUBLIC_BASE_URL: "",
        LIVEKIT_URL: livekitUrl,
        LIVEKIT_API_KEY: "devkey",
        LIVEKIT_API_SECRET: "secret-of-the-livekit-server-000",
      },
      { registry: server.registry },
    );
    try {
      const page = await people.open(
        "es",
        tokenLink(withLiveKit.baseUrl.replace("127.0.0.1", "localhost"), {
          room: "api-00000000000000000000",
          token: "the-join-token",
          language: "es",
          livekit: livekitUrl,
        }),
      );
      await page.click("#join");
      await page.locator("body[data-state=failed]").waitFor({ timeout: WAIT.timeout });
      expect(await page.textContent("#status")).toMatch(/^Could not join: /u);
      // livekit-client asked LiveKit's signalling endpoint, with the link's token, subscribing to
      // nothing by itself (the page picks its language's track).
      const signalling = asked.filter((line) => line.startsWith("UPGRADE /rtc"));
      expect(signalling.length, asked.join("\n")).toBeGreaterThan(0);
      for (const line of signalling) {
        const query = new URL(line.slice("UPGRADE ".length), livekitUrl).searchParams;
        expect(query.get("access_token")).toBe("the-join-token");
        expect(autoSubscribeOf(query)).toBe(false);
      }
    } finally {
      // Another origin, and the refused connection's own errors: not the embedded meeting's.
      people.requested.length = requestedBefore;
      people.consoleErrors.length = errorsBefore;
      await withLiveKit.close();
      await new Promise((resolve) => livekit.close(resolve));
    }
  });

  it("never puts the API key in a URL, reaches only the page's origin, and breaks no rule of the CSP", () => {
    expect(people.requested.length).toBeGreaterThan(5);
    expect(people.requested.filter((url) => url.includes(API_KEY))).toEqual([]);
    const host = new URL(origin).host;
    expect(
      people.requested.filter((url) => /^(https?|wss?):/u.test(url) && new URL(url).host !== host),
    ).toEqual([]);
    expect(people.requested.some((url) => url.startsWith(`${origin.replace(/^http/u, "ws")}/rooms/`))).toBe(
      true,
    );
    expect(people.consoleErrors).toEqual([]);
  });
});
