import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Native engines (koffi, onnxruntime) are safest in child processes rather than worker threads.
    pool: "forks",
    // Two files at a time even on two cores (vitest would run one): the whisper.cpp file spends about
    // five minutes in single-threaded native decodes, which the rest of the suite can overlap.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
