// Dubbing a video with the SDK (@relay-translate/client; not on the npm registry yet:
// install its packed tarball, see docs/clients.md#sdk).
// Usage: RELAY_SERVER=http://localhost:8080 RELAY_API_KEY=... npx tsx examples/sdk-dub.ts examples/talk.mp4 es out/dubbed.mp4
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { DubbingClient } from "@relay-translate/client";

const [input, targetLang, output] = process.argv.slice(2);
if (!input || !targetLang || !output)
  throw new Error("usage: sdk-dub.ts <video> <target language> <output.mp4>");
const client = new DubbingClient(
  process.env.RELAY_SERVER ?? "http://localhost:8080",
  process.env.RELAY_API_KEY ?? "",
);

// 1. Upload through a presigned URL (in browsers pass the File from an <input type=file>).
const { sourceUrl } = await client.upload(path.basename(input), await readFile(input), {
  onProgress: (sent, total) => process.stderr.write(`\ruploading ${Math.round((100 * sent) / total)} %`),
});
// 2. Create the job (safe to retry: one Idempotency-Key) and follow it, polling with backoff.
const created = await client.create({ sourceUrl, targetLang });
const job = await client.wait(created.job_id, {
  onUpdate: (update) =>
    process.stderr.write(
      `\r${update.progress?.stage_name ?? update.status} ${update.progress?.percent ?? 0} %   `,
    ),
});
process.stderr.write("\n");
if (job.status === "failed") throw new Error(`${job.error}: ${job.error_message}`);
// 3. The result URL is valid for 48 hours; subtitles come from the job's segments.
await writeFile(output, Buffer.from(await (await client.download(job)).arrayBuffer()));
console.log(`saved ${output} (${job.input_duration_sec} s, ${job.cost_usd} USD)`);
console.log(await client.subtitles(job.job_id, "translated", "srt"));
