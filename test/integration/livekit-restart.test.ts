import { readFile } from "node:fs/promises";
import path from "node:path";
import { RoomServiceClient } from "livekit-server-sdk";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { roomServiceUrl } from "../../src/rooms/livekit/backend.js";
import { startLiveKit, type LiveKitServer } from "../../scripts/local-servers.js";
import { LiveKitParticipant } from "../support/livekit-participant.js";
import { createRoomSession } from "../support/room-client.js";
import { freePort } from "../support/ports.js";
import { PROJECT_ROOT } from "../support/run-script.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { liveKitBinaryProblem } from "../support/servers.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

/**
 * What a shared LiveKit server cannot be put through on demand, on LiveKit servers of this file's
 * own (the pinned build, scripts/local-servers.ts): killed mid-room with SIGKILL and restarted where
 * it was, and started with the repository's own deploy/livekit.yaml and compose.yaml settings.
 */
const problem =
  liveKitBinaryProblem() ??
  (sharedMissing("data/speech/librivox-pocketsphinx") ? "../shared speech is missing" : undefined);
if (problem) console.warn(`LiveKit restarts not tested: ${problem}`);

const SPEC_ROOM = { source_language: "en-US", target_language: "es-ES" } as const;
const TRANSLATOR = "translation-agent";
const participants: LiveKitParticipant[] = [];
const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  await Promise.all(participants.splice(0).map((participant) => participant.leave()));
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function metric(server: TestServer, name: string): Promise<number> {
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  const line = text.split("\n").find((candidate) => candidate.startsWith(`${name} `));
  return Number(line?.split(" ")[1] ?? Number.NaN);
}

async function serviceOn(livekit: LiveKitServer): Promise<TestServer> {
  const server = await startServer({
    LIVEKIT_URL: livekit.url,
    LIVEKIT_API_KEY: livekit.apiKey,
    LIVEKIT_API_SECRET: livekit.apiSecret,
    RATE_LIMIT_PER_MINUTE: "1000",
  });
  cleanups.push(() => server.close());
  return server;
}

async function join(access: { url: string; token: string }): Promise<LiveKitParticipant> {
  const participant = await LiveKitParticipant.join(access.url, access.token);
  participants.push(participant);
  return participant;
}

describe.skipIf(problem)("a LiveKit server that dies and comes back", () => {
  it("killed mid-room: the room ends, its slot is freed, and rooms work again once it is restarted", async () => {
    let livekit = await startLiveKit();
    cleanups.push(() => livekit.stop());
    const server = await serviceOn(livekit);
    const session = await createRoomSession(server.baseUrl, API_KEY, SPEC_ROOM);
    const alice = await join(session);
    await expect.poll(() => alice.room.remoteParticipants.has(TRANSLATOR)).toBe(true);
    expect(await metric(server, "relay_rooms_open")).toBe(1);

    await livekit.kill();
    // The translator's connection is lost for good: the service ends the room and frees its slot
    // (nothing is left to translate), and no translator lingers.
    await expect.poll(() => metric(server, "relay_rooms_open"), { interval: 500 }).toBe(0);
    await expect.poll(() => metric(server, "relay_sessions_live")).toBe(0);
    // Meanwhile a new room cannot be had, and the service says why.
    const refused = await createRoomSession(server.baseUrl, API_KEY, SPEC_ROOM).catch(
      (error: unknown) => error,
    );
    expect(JSON.stringify((refused as { body: unknown }).body)).toMatch(/LiveKit room service/u);

    livekit = await startLiveKit({
      ports: livekit.ports,
      apiKey: livekit.apiKey,
      apiSecret: livekit.apiSecret,
    });
    cleanups.push(() => livekit.stop());
    const again = await createRoomSession(server.baseUrl, API_KEY, SPEC_ROOM);
    const bob = await join(again);
    await expect.poll(() => bob.room.remoteParticipants.has(TRANSLATOR)).toBe(true);
    await bob.untilHeard();
    await bob.speak(await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav")));
    await expect
      .poll(
        () =>
          bob.transcripts(TRANSLATOR).filter((m) => m.type === "translated_transcript" && m.is_final === true)
            .length,
        { interval: 250 },
      )
      .toBeGreaterThan(0);
    // The old room is over for its owner too: ending it again succeeds.
    const ended = await fetch(`${server.baseUrl}/api/beta1/session/end`, {
      method: "POST",
      headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ session_id: session.room_name }),
    });
    expect(ended.status).toBe(200);
  });
});

describe.skipIf(problem)("the repository's LiveKit settings on the real server", () => {
  it("deploy/livekit.yaml with compose.yaml's keys starts, and the service's rooms work on it", async () => {
    const compose = parse(await readFile(path.join(PROJECT_ROOT, "compose.yaml"), "utf8")) as {
      services: Record<string, { command?: string[]; environment?: Record<string, string> }>;
    };
    const defaultOf = (value: string) => value.replace(/\$\{[A-Z_]+:-([^}]*)\}/gu, "$1");
    const [apiKey, apiSecret] = defaultOf(compose.services.livekit!.environment!.LIVEKIT_KEYS!).split(": ");
    const relay = compose.services.relay!.environment!;
    expect(defaultOf(relay.LIVEKIT_API_KEY!)).toBe(apiKey);
    expect(defaultOf(relay.LIVEKIT_API_SECRET!)).toBe(apiSecret);
    expect(compose.services.livekit!.command).toEqual(["--config", "/etc/livekit.yaml"]);

    // LiveKit parses the file strictly: an unknown or misspelt key stops it at start-up. Its ports
    // (7880-7882) are replaced by free ones: another test run or a developer's LiveKit may hold them.
    const config = parse(await readFile(path.join(PROJECT_ROOT, "deploy/livekit.yaml"), "utf8")) as {
      port: number;
      rtc: { tcp_port: number; udp_port: number };
    };
    const ports = { port: await freePort(), tcpPort: await freePort(), udpPort: await freePort() };
    Object.assign(config, { port: ports.port });
    Object.assign(config.rtc, { tcp_port: ports.tcpPort, udp_port: ports.udpPort });
    const livekit = await startLiveKit({
      config: stringify(config),
      ports,
      apiKey: apiKey!,
      apiSecret: apiSecret!,
    });
    cleanups.push(() => livekit.stop());
    const server = await serviceOn(livekit);
    const session = await createRoomSession(server.baseUrl, API_KEY, SPEC_ROOM);
    const rooms = new RoomServiceClient(roomServiceUrl(livekit.url), apiKey!, apiSecret!);
    const [room] = await rooms.listRooms([session.room_name]);
    expect(room?.name).toBe(session.room_name);
    // The file's room.auto_create: false holds: a room nobody created cannot be joined.
    await rooms.deleteRoom(session.room_name);
    await expect(LiveKitParticipant.join(session.url, session.token)).rejects.toThrow();
  });
});
