import { defineConfig } from "vitest/config";
import { LongestFirst } from "./test/support/sequencer.js";
import { WAIT } from "./test/support/wait.js";

/**
 * Three tiers (docs/testing.md): unit (pure logic and engine doubles), integration (the real
 * service in the test process over real HTTP/WebSocket with real engines) and system (the service,
 * CLI and SDK as users run them: built processes, a fleet behind nginx, a browser), in two vitest
 * projects: `unit`, and `service` for the other two. All run in one pool of forks, longest files
 * first, so the cores stay busy until the end.
 */
export default defineConfig({
  test: {
    // Native engines (koffi, onnxruntime) are safest in child processes rather than worker threads.
    pool: "forks",
    // Forks are reused from file to file: vitest reads this from the root config only (a project's
    // `isolate` alone still gives every file a new fork). Where forks are reused, vitest runs one
    // project at a time, ending the forks between projects: hence two projects, not one per tier.
    poolOptions: { forks: { isolate: false } },
    // Four forks on two cores: many tests wait on real-time audio, sockets and child processes, and
    // the cores stay busier with a fourth (1.84 cores busy on average against 1.79 with three,
    // docs/benchmarks.md, "npm test"); each fork loads the service once.
    maxWorkers: 4,
    // All four from the start, and kept: a fork idle above the minimum is ended at once (tinypool's
    // idle timeout is 0), throwing away the service it loaded.
    minWorkers: 4,
    // Generous: on a loaded 2-core VM (docs/benchmarks.md, "npm test") real-time streaming tests run
    // at a third of their quiet speed or less; a timeout is for a hung test, not a slow machine. One
    // value for every test and hook (none sets a shorter one of its own).
    testTimeout: 600_000,
    hookTimeout: 600_000,
    // The same for what a test waits on: expect.poll's default (vi.waitFor and Playwright's waits
    // are given WAIT too), so no wait of a test is shorter than a loaded machine needs.
    expect: { poll: { ...WAIT } },
    // Builds dist/ once when the sources changed: system tests run the built service and CLI.
    globalSetup: ["test/support/global-setup.ts"],
    // TEST_CPU_REPORT=<file>: CPU seconds per test file (test/support/cpu-probe.ts).
    setupFiles: process.env.TEST_CPU_REPORT ? ["test/support/cpu-probe.ts"] : [],
    sequence: { sequencer: LongestFirst },
    projects: [
      // Fresh modules for every unit file (some replace timers and spies), in the same forks.
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts", "packages/livekit-agents/test/unit/**/*.test.ts"],
          poolOptions: { forks: { isolate: true } },
        },
      },
      // Integration and system files run one after another in each fork and share its modules: the
      // service and its engines load once per fork (test/support/app.ts shares the registry), not
      // once per file. Collecting these files costs 27 CPU-s so, 134 with a fork per file.
      {
        extends: true,
        test: {
          name: "service",
          include: [
            "test/integration/**/*.test.ts",
            "test/system/**/*.test.ts",
            // The LiveKit Agents plugin's tests live beside it: they resolve @livekit/agents and the
            // @livekit/rtc-node it needs (0.13, not the service's 1.x) from the package's own node_modules.
            "packages/livekit-agents/test/integration/**/*.test.ts",
          ],
        },
      },
    ],
  },
});
