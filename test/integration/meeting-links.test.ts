import { setTimeout as sleep } from "node:timers/promises";
import { TokenVerifier } from "livekit-server-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpError } from "../../src/cli/recording-socket.js";
import { embeddedRoomSecret, joinRoom } from "../support/room-client.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";

/**
 * Meetings' share links over real HTTP and WebSocket, on the embedded room server with the
 * embedded engines (English is recognized, Spanish is listen-only): an invitation opens its
 * meeting for the meeting's life with a fresh token each time, as the same participant with the
 * name they gave; the creator's checks keep an empty meeting open; an ended meeting says why.
 */
let server: TestServer;
/** Short, so a link is used again after its first token expired. */
const TOKEN_TTL_SEC = 10;

beforeAll(async () => {
  server = await startServer({
    ROOM_TOKEN_TTL_SEC: String(TOKEN_TTL_SEC),
    ROOM_EMPTY_TIMEOUT_SEC: "2",
    ROOM_DEPARTURE_TIMEOUT_SEC: "1",
    RATE_LIMIT_PER_MINUTE: "1000",
    ROOMS_EMPTY_PER_ACCOUNT: "1000",
  });
});
afterAll(async () => {
  await server?.close();
});

type Answer = Record<string, unknown> & { error?: { code: string; message: string } };

async function post(path: string, body: unknown, key?: string): Promise<{ status: number; body: Answer }> {
  const response = await fetch(new URL(path, server.baseUrl), {
    method: "POST",
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Answer };
}

/** A meeting in English and Spanish: the creator's invitation and the Spanish participant's. */
async function meeting() {
  const created = await post("/api/beta1/session", { languages: ["en", "es"], language: "en" }, API_KEY);
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const room = created.body["room_name"] as string;
  const added = await post(`/api/beta1/session/${room}/participants`, { language: "es" }, API_KEY);
  expect(added.status).toBe(200);
  return {
    room,
    host: created.body["invitation"] as string,
    guest: added.body["invitation"] as string,
    guestIdentity: added.body["identity"] as string,
  };
}

const status = (invitation: string) => post("/api/beta1/invitation", { invitation });
const join = (invitation: string, name?: string) =>
  post("/api/beta1/invitation/join", { invitation, ...(name === undefined ? {} : { name }) });

describe("meeting share links", () => {
  it("open their meeting for its life: a fresh token at each join, the same participant, after the first token expired", async () => {
    const { room, host, guest, guestIdentity } = await meeting();
    expect(guest.length).toBeLessThan(60);
    expect((await status(guest)).body).toEqual({
      status: "open",
      room_name: room,
      language: "es",
      languages: ["en", "es"],
      // No Spanish recognizer among the embedded engines: Bruno hears, and is not heard.
      listen_only: true,
      host: false,
      check_after_sec: 15,
    });
    expect((await status(host)).body).toMatchObject({ language: "en", listen_only: false, host: true });

    // Bruno's page joins with the name he typed (a bidi override in it is dropped).
    const first = await join(guest, "Bru\u202Eno ");
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      room_name: room,
      identity: guestIdentity,
      language: "es",
      name: "Bru no",
    });
    const claims = await new TokenVerifier("relay-embedded", embeddedRoomSecret(server)).verify(
      first.body["token"] as string,
    );
    expect(claims).toMatchObject({ sub: guestIdentity, name: "Bru no", video: { room, roomJoin: true } });
    const bruno = await joinRoom(first.body as { url: string; token: string });

    // Alice joins: she is told who is there, with language and name; Bruno is told her name.
    const alice = await joinRoom((await join(host, "Alice")).body as { url: string; token: string });
    expect(alice.messages.find((m) => m.type === "joined")).toMatchObject({
      participants: [guestIdentity],
      participant_info: [{ identity: guestIdentity, language: "es", name: "Bru no" }],
    });
    await bruno.waitFor((m) => m.type === "participant_joined" && m["name"] === "Alice");

    // Bruno drops out; once his first token has expired, his link still brings him back as himself.
    bruno.close();
    await alice.waitFor((m) => m.type === "participant_left" && m.identity === guestIdentity);
    const expiresAt = (claims.exp ?? 0) * 1000;
    await sleep(Math.max(0, expiresAt - Date.now()) + 1500);
    await expect(joinRoom(first.body as { url: string; token: string })).rejects.toBeInstanceOf(HttpError);
    const again = await join(guest, "Bruno");
    expect(again.body).toMatchObject({ identity: guestIdentity, name: "Bruno" });
    const back = await joinRoom(again.body as { url: string; token: string });
    await alice.waitFor(
      (m) => m.type === "participant_joined" && m.identity === guestIdentity && m["name"] === "Bruno",
    );
    back.close();
    alice.close();
  });

  it("keep an empty meeting open while its creator's page checks; without that it closes, and every link says why", async () => {
    const waiting = await meeting();
    // The creator's page checks every few seconds; well past ROOM_EMPTY_TIMEOUT_SEC (2 s) it is open.
    for (let i = 0; i < 8; i += 1) {
      expect((await status(waiting.host)).body["status"]).toBe("open");
      await sleep(500);
    }
    expect((await status(waiting.guest)).body["status"]).toBe("open");

    // A meeting whose creator's page is gone (nobody checks its link): closed when nobody came.
    const abandoned = await meeting();
    let answer = await status(abandoned.guest);
    while (answer.body["status"] === "open") {
      await sleep(250);
      answer = await status(abandoned.guest);
    }
    expect(answer.body).toMatchObject({
      status: "ended",
      ended_reason: "empty",
      message: "This meeting has ended: nobody was in it.",
    });
    expect(await join(abandoned.guest)).toEqual({
      status: 404,
      body: { error: { code: "not_found", message: "This meeting has ended: nobody was in it." } },
    });

    // Ended by its creator: the links say so.
    expect((await post("/api/beta1/session/end", { session_id: waiting.room }, API_KEY)).status).toBe(200);
    expect((await status(waiting.guest)).body).toMatchObject({
      status: "ended",
      ended_reason: "owner",
      message: "This meeting has ended: the person who created it ended it.",
    });
  });

  it("refuse what is not a share link of this service with the error body", async () => {
    const { guest } = await meeting();
    const forged = `${guest.slice(0, -2)}${guest.endsWith("AA") ? "BB" : "AA"}`;
    for (const invitation of [forged, "not-a-link-at-all-not-a-link", "x"]) {
      const answer = await status(invitation);
      expect(answer.status, invitation).toBe(404);
      expect(answer.body.error?.code).toBe("not_found");
      expect((await join(invitation)).status).toBe(404);
    }
    for (const body of [
      {},
      { invitation: 7 },
      { invitation: "a".repeat(500) },
      { invitation: guest, name: 5 },
    ]) {
      const answer = await post("/api/beta1/invitation/join", body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body.error?.code).toBe("invalid_request");
    }
    const long = await join(guest, "N".repeat(900));
    expect(long.body["name"]).toBe("N".repeat(40));
  });
});
