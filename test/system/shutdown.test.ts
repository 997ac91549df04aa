import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { createSession, RealtimeSocket } from "../../src/cli/recording-socket.js";
import { nodeArgs, PROJECT_ROOT } from "../support/run-script.js";
import { startServiceProcess } from "../support/service-process.js";

describe("the service process (npm start's entry point)", () => {
  it("serves after start-up, and on SIGTERM closes every session with 1001 and exits 0", async () => {
    const { baseUrl, child, exited, stderr } = await startServiceProcess("shutdown", {
      API_KEYS: "k1",
      DATA_DIR: "/tmp/relay-shutdown-test",
    });
    try {
      const sockets = await Promise.all(
        ([{}, { mode: "tts" }] as Record<string, string>[]).map(async (params) => {
          const socket = await RealtimeSocket.connect((await createSession(baseUrl, "k1", params)).ws_url);
          await socket.waitFor((m) => m.type === "ready");
          return socket;
        }),
      );
      sockets[0]!.sendAudio(new Int16Array(3200));
      child.kill("SIGTERM");
      expect(await Promise.all(sockets.map((s) => s.closed()))).toEqual([1001, 1001]);
      expect(await exited).toBe(0);
      expect(stderr()).toBe("");
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("refuses to start on invalid configuration, saying what is wrong", async () => {
    const child = spawn(process.execPath, nodeArgs("src/main.ts"), {
      cwd: PROJECT_ROOT,
      env: { ...process.env, PORT: "eighty", MAX_SESSIONS: "0" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(code).toBe(1);
    expect(stderr).toMatch(/invalid configuration/);
    expect(stderr).toMatch(/PORT/);
    expect(stderr).toMatch(/MAX_SESSIONS/);
  });
});
