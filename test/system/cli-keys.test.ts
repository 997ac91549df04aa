/**
 * `relay keys`: an operator creates, lists, revokes and tops up keys on the service's database while
 * the service runs; the running service honours each change at once (real HTTP, real CLI process).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSession, RealtimeSocket } from "../../src/cli/recording-socket.js";
import { injectApp, type InjectedApp } from "../support/app.js";
import { createRoomSession, joinRoom } from "../support/room-client.js";
import { runScript } from "../support/run-script.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";

let service: InjectedApp;
let database: string;

beforeAll(async () => {
  // A file database (not in memory) the CLI process can open too.
  service = await injectApp({ DATABASE_URL: "" });
  database = service.config.databaseUrl;
});
afterAll(async () => {
  await service?.close();
});

async function keys(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runScript("src/cli/main.ts", ["keys", ...args, "--database", database], {});
}

async function sessionStatus(key: string): Promise<number> {
  return (await service.inject("/v1/session", { headers: { authorization: `Bearer ${key}` } })).status;
}

async function uploadStatus(key: string): Promise<number> {
  const response = await service.inject("/api/dubbing/upload-url", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ filename: "a.mp4", content_type: "video/mp4" }),
  });
  return response.status;
}

describe("relay keys", () => {
  it("creates a key the running service accepts, lists it, tops it up and revokes it", async () => {
    const created = await keys(
      "create",
      "--label",
      "mobile app",
      "--balance",
      "0",
      "--entitlements",
      "realtime",
      "--json",
    );
    expect(created.code).toBe(0);
    const { key, id } = JSON.parse(created.stdout) as { key: string; id: string };
    expect(key).toMatch(/^rk_[\w-]{43}$/u);
    // No balance yet: known but refused (402); entitled to realtime only (403 for dubbing).
    expect(await sessionStatus(key)).toBe(402);
    expect(await uploadStatus(key)).toBe(403);

    const granted = await keys("grant", id, "12.5", "--json");
    expect(JSON.parse(granted.stdout)).toMatchObject({ id, balanceUsd: 12.5, label: "mobile app" });
    expect(await sessionStatus(key)).toBe(200);

    const listed = await keys("list");
    expect(listed.stdout).toMatch(new RegExp(`${id}\\s+mobile app\\s+realtime\\s+12\\.50\\s+.*active`, "u"));
    expect(listed.stdout).not.toContain(key);

    const revoked = await keys("revoke", key, "--json");
    expect(JSON.parse(revoked.stdout)).toMatchObject({ id, revokedAt: expect.any(String) });
    expect(await sessionStatus(key)).toBe(401);
  });

  it("refuses unknown keys, bad amounts and bad entitlements with a message", async () => {
    const unknown = await keys("revoke", "0123456789ab");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no key matches "0123456789ab"/u);
    const badAmount = await keys("grant", "0123456789ab", "-5");
    expect(badAmount.code).not.toBe(0);
    expect(badAmount.stderr).toMatch(/amount in USD/u);
    const badEntitlement = await keys("create", "--entitlements", "everything");
    expect(badEntitlement.code).not.toBe(0);
    expect(badEntitlement.stderr).toMatch(/realtime\+rooms\+dubbing/u);
  });
});

describe("revoking a key while it is in use", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ REVOCATION_CHECK_SEC: "0.2" });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("ends its live sessions and rooms within seconds and refuses its unclaimed ws_urls", async () => {
    const created = await runScript(
      "src/cli/main.ts",
      ["keys", "create", "--json", "--database", server.config.databaseUrl],
      {},
    );
    const { key } = JSON.parse(created.stdout) as { key: string };
    const socket = await RealtimeSocket.connect((await createSession(server.baseUrl, key)).ws_url);
    await socket.waitFor((m) => m.type === "ready");
    const unclaimed = await createSession(server.baseUrl, key);
    const room = await createRoomSession(server.baseUrl, key, {
      source_language: "en-US",
      target_language: "es-ES",
    });
    const participant = await joinRoom(room);
    // Another key's session is left alone.
    const bystander = await RealtimeSocket.connect((await createSession(server.baseUrl, API_KEY)).ws_url);
    await bystander.waitFor((m) => m.type === "ready");

    const revoked = await runScript(
      "src/cli/main.ts",
      ["keys", "revoke", key, "--database", server.config.databaseUrl],
      {},
    );
    expect(revoked.code).toBe(0);
    expect(await socket.closed()).toBe(4401);
    expect(socket.messages.at(-1)).toMatchObject({
      type: "error",
      error: expect.stringMatching(/API key .* was revoked/u),
    });
    await participant.closed();
    expect(server.app.rooms.count).toBe(0);
    await expect(RealtimeSocket.connect(unclaimed.ws_url)).rejects.toMatchObject({ status: 401 });
    expect(bystander.isOpen).toBe(true);
    bystander.close();
  });
});
