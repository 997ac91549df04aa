/**
 * The browser playground end to end in headless Chromium (Debian's, driven by playwright-core),
 * against the real service: a WAV from ../shared/data/speech is the fake microphone; the page
 * shows its translation and plays the translated speech; the text-to-speech tab speaks; the
 * dubbing tab uploads a video with progress, follows the job and plays the result. Each tab is
 * screenshotted: into docs/ with RELAY_UPDATE_SCREENSHOTS=1 (how docs/playground-*.png were made),
 * otherwise into a temporary directory, so a test run leaves the checkout as it was. The API key
 * never appears in a URL.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumMissing, launchWithMicrophone } from "../support/chromium.js";
import { makeTestVideo } from "../support/media.js";
import { PROJECT_ROOT } from "../support/run-script.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { WAIT } from "../support/wait.js";

const problem = chromiumMissing()
  ? chromiumMissing()
  : sharedMissing("data/speech")
    ? "../shared speech is missing"
    : undefined;
if (problem) console.warn(`playground not tested: ${problem}`);

let server: TestServer;
let browser: Browser;
let page: Page;
let dir: string;
const urls: string[] = [];

beforeAll(async () => {
  if (problem) return;
  // The page loads the SDK from its build, which test/support/global-setup.ts keeps fresh (building
  // it here would rewrite the files other test processes are loading).
  // As a new user runs it: no PUBLIC_BASE_URL, the page opened at localhost (every URL the service
  // hands out must follow that origin, or the page's CSP refuses them).
  server = await startServer({ DUBBING_WORKERS: "1", PUBLIC_BASE_URL: "" });
  dir = await mkdtemp(path.join(tmpdir(), "relay-playground-"));
  browser = await launchWithMicrophone(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
  page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  page.on("request", (request) => urls.push(request.url()));
  await page.goto(server.baseUrl.replace("127.0.0.1", "localhost"));
  await page.fill("#api-key", API_KEY);
  await page.waitForSelector("#live-to option[value=es]", { state: "attached" });
});
afterAll(async () => {
  await browser?.close();
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const screenshot = (name: string) =>
  page.screenshot({
    path: path.join(process.env.RELAY_UPDATE_SCREENSHOTS ? path.join(PROJECT_ROOT, "docs") : dir, name),
  });

const frames = async (selector: string) => Number(await page.getAttribute(selector, "data-frames"));

describe.skipIf(problem !== undefined)("the playground in Chromium", () => {
  it("translates the microphone live: transcripts, translation and translated speech", async () => {
    // Why "From" offers only English here, and languages by their names.
    expect(await page.textContent("#live-tier")).toBe(
      "English recognition only: PocketSphinx — `npx relay models pull base`, then restart, for 99 languages",
    );
    expect(await page.locator("#live-from option").allTextContents()).toEqual(["English (en)"]);
    expect(await page.locator("#live-to option[value=fr]").textContent()).toBe("French (fr)");
    await page.selectOption("#live-from", "en");
    await page.selectOption("#live-to", "fr");
    // The page says which engines serve the chosen pair (Apertium, through Spanish).
    expect(await page.textContent("#live-route")).toBe("Translated by apertium through es");
    await page.selectOption("#live-to", "es");
    expect(await page.textContent("#live-route")).toBe("Translated by apertium");
    await page.click("#live-start");
    const translated = page.locator("#live-transcript .translated:not(.interim)", { hasText: /metros/iu });
    await translated.first().waitFor({ timeout: WAIT.timeout });
    await expect.poll(() => frames("#live-audio")).toBeGreaterThan(0);
    expect(await page.locator("#live-transcript .original").first().textContent()).toMatch(/^\[en\] /u);
    await screenshot("playground-live.png");
    await page.click("#live-stop");
  });

  it("speaks text in the text-to-speech tab", async () => {
    await page.click("#tab-tts");
    await page.selectOption("#tts-language", "es");
    await page.fill("#tts-text", "Buenos días a todos.");
    await page.click("#tts-speak");
    await page.locator("#tts-status", { hasText: "Done." }).waitFor({ timeout: WAIT.timeout });
    expect(await frames("#tts-audio")).toBeGreaterThan(0);
    await screenshot("playground-tts.png");
  });

  it("uploads a video with progress, follows the job and plays the dubbed result", async () => {
    await page.click("#tab-dub");
    await page.setInputFiles("#dub-file", await makeTestVideo(dir));
    await page.selectOption("#dub-from", "en");
    await page.selectOption("#dub-to", "es");
    await page.click("#dub-start");
    await page.locator("#dub-status", { hasText: "completed" }).waitFor({ timeout: WAIT.timeout });
    expect(Number(await page.getAttribute("#dub-progress", "value"))).toBe(100);
    const src = await page.getAttribute("#dub-result", "src");
    expect((await fetch(src!)).status).toBe(200);
    // The page can play it: the video element loads its metadata.
    await expect
      .poll(() =>
        page.$eval("#dub-result", (video) => (video as unknown as { readyState: number }).readyState),
      )
      .toBeGreaterThan(0);
    await screenshot("playground-dubbing.png");
  });

  it("never puts the API key in a URL", () => {
    expect(urls.length).toBeGreaterThan(5);
    expect(urls.filter((url) => url.includes(API_KEY))).toEqual([]);
  });

  it("reaches the service only at the origin the page was opened at (uploads and results included)", () => {
    const origin = new URL(server.baseUrl.replace("127.0.0.1", "localhost")).origin;
    const elsewhere = urls.filter(
      (url) => /^(https?|wss?):/u.test(url) && new URL(url).host !== new URL(origin).host,
    );
    expect(elsewhere).toEqual([]);
    expect(urls.some((url) => url.startsWith(`${origin}/storage/`))).toBe(true);
  });
});
