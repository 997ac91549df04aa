import { serviceOnStandIn, type StandInService } from "../support/stand-in-engines.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestVideo } from "../support/media.js";
import type { OpenAiTestServer } from "../support/openai-server.js";
import { API_KEY, type TestServer } from "../support/server.js";
import { sharedMissing } from "../support/shared.js";
import { dubbingClient } from "../support/dubbing-client.js";

/**
 * source_lang "auto" with a recognizer that identifies languages (a remote Whisper, stood in for by
 * a local server that reports the language it is told to): the job is dubbed from the language
 * identified, and its status says which one instead of "auto". (Without such a recognizer "auto" is
 * refused at creation: see dubbing-api.test.ts.)
 */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
const LANGUAGES = ["en", "es", "de", "fr"];

let service: StandInService;
let remote: OpenAiTestServer;
let server: TestServer;
let sourceUrl: string;

const api = (method: string, route: string, body?: unknown) =>
  dubbingClient(server.baseUrl, API_KEY).request(method, route, body);
const finished = (id: string) => dubbingClient(server.baseUrl, API_KEY).finished(id);

beforeAll(async () => {
  if (SPEECH_MISSING) return;
  service = await serviceOnStandIn(
    "dubbing-languages",
    (entry) => ({
      asr: [entry("whisper-large", LANGUAGES)],
      mt: [entry("llm", LANGUAGES)],
      tts: [entry("tts-1", LANGUAGES, { voices: { female: ["nova"], male: ["onyx"] } })],
    }),
    { DUBBING_WORKERS: "1", RATE_LIMIT_PER_MINUTE: "1000" },
  );
  ({ remote, server } = service);
  const video = await makeTestVideo(service.dir);
  sourceUrl = await dubbingClient(server.baseUrl, API_KEY).upload(video);
});
afterAll(async () => {
  await service?.close();
});

describe.skipIf(SPEECH_MISSING)("source_lang auto with a language-identifying recognizer", () => {
  it("dubs from the language identified and shows it as the job's source_lang", async () => {
    remote.reset();
    remote.detectedLanguage = "german";
    remote.reply = (text) => `[es] ${text.trim()}`;
    expect(server.registry.languageIdentifier()).toBeDefined();
    // source_lang omitted: the spec's default, "auto".
    const created = await api("POST", "/api/dubbing/jobs", { source_url: sourceUrl, target_lang: "es" });
    expect(created.status).toBe(201);
    expect(created.body.source_lang).toBe("auto");
    const job = await finished(created.body.job_id as string);
    expect(job).toMatchObject({ status: "completed", error: null, source_lang: "de", target_lang: "es" });
    const { body: list } = await api("GET", "/api/dubbing/jobs?limit=1");
    expect(list.jobs).toEqual([expect.objectContaining({ job_id: job.job_id, source_lang: "de" })]);
    // Identified without a language, then recognized as German; translated from German.
    const transcriptions = remote.ofEndpoint("transcriptions");
    expect(transcriptions[0]!.fields!.language).toBeUndefined();
    expect(transcriptions.at(-1)!.fields!.language).toEqual(["de"]);
    expect(JSON.stringify(remote.ofEndpoint("chat").at(-1)!.json!.messages)).toMatch(/German/);
  });

  it("fails the job, saying what was heard, when the language identified cannot be dubbed into the target", async () => {
    remote.reset();
    remote.detectedLanguage = "japanese";
    const created = await api("POST", "/api/dubbing/jobs", {
      source_url: sourceUrl,
      target_lang: "es",
      source_lang: "auto",
    });
    expect(created.status).toBe(201);
    const job = await finished(created.body.job_id as string);
    expect(job).toMatchObject({
      status: "failed",
      error: "processing_failed",
      error_message: expect.stringMatching(/identified as ja, which cannot be dubbed into "es"/),
      source_lang: "auto",
      cost_usd: null,
    });
  });
});
