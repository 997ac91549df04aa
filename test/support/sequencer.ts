import { readFileSync } from "node:fs";
import path from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { PROJECT_ROOT } from "./run-script.js";

/** Seconds each test file took in a full run on 2 cores (`npm run test:durations` rewrites it). */
const DURATIONS_FILE = path.join(PROJECT_ROOT, "test", "durations.json");
/** What a file missing from the durations (a new one) is assumed to take. */
const UNKNOWN_SECONDS = 10;

function recordedDurations(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(DURATIONS_FILE, "utf8")) as Record<string, number>;
  } catch {
    return {};
  }
}

/**
 * Longest files first, so the last file to start is a short one and both forks finish together
 * (a long file started last would run alone on one core). The durations come from
 * test/durations.json, committed, so a fresh clone schedules as well as a warm checkout.
 */
export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const durations = recordedDurations();
    const seconds = (file: TestSpecification): number =>
      durations[path.relative(PROJECT_ROOT, file.moduleId)] ?? UNKNOWN_SECONDS;
    return [...files].sort((a, b) => seconds(b) - seconds(a));
  }
}
