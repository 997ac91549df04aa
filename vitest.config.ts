import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Native engines (koffi, onnxruntime) are safest in child processes rather than worker threads.
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
