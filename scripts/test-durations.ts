/**
 * Writes test/durations.json (seconds per test file, read by test/support/sequencer.ts to start the
 * longest files first) from a vitest JSON report: `npm run test:durations` runs the suite with that
 * reporter and calls this.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const reportFile = process.argv[2];
if (!reportFile) {
  console.error("usage: tsx scripts/test-durations.ts <vitest JSON report>");
  process.exit(2);
}
const report = JSON.parse(readFileSync(reportFile, "utf8")) as {
  testResults: { name: string; startTime: number; endTime: number }[];
};
const durations = Object.fromEntries(
  report.testResults
    .map(
      ({ name, startTime, endTime }) =>
        [path.relative(ROOT, name), Math.round((endTime - startTime) / 100) / 10] as const,
    )
    .sort(([, a], [, b]) => b - a),
);
writeFileSync(path.join(ROOT, "test", "durations.json"), `${JSON.stringify(durations, null, 2)}\n`);
console.log(`test/durations.json: ${Object.keys(durations).length} files`);
