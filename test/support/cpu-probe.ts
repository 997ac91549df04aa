/**
 * CPU seconds per test file, for finding what makes `npm test` slow: with TEST_CPU_REPORT=<file>
 * (vitest.config.ts), each file appends a line "<file>\t<user>\t<system>\t<children's user>\t<children's
 * system>" (children: processes the file started and reaped: CLI runs, services, engines' programs).
 * Read from /proc/self/stat, since process.cpuUsage() counts no children.
 */
import { appendFileSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, expect } from "vitest";

const CLOCK_TICKS_PER_SECOND = 100;

/** utime, stime, cutime, cstime: fields 14-17 of /proc/self/stat (after the parenthesized name). */
function cpuTicks(): number[] {
  const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]!.split(" ");
  return [14, 15, 16, 17].map((field) => Number(fields[field - 3]));
}

let start: number[] = [];
beforeAll(() => {
  start = cpuTicks();
});
afterAll(() => {
  const seconds = cpuTicks().map((ticks, i) => (ticks - start[i]!) / CLOCK_TICKS_PER_SECOND);
  appendFileSync(process.env.TEST_CPU_REPORT!, `${expect.getState().testPath}\t${seconds.join("\t")}\n`);
});
