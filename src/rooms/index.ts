import type { Config } from "../config.js";
import { EmbeddedRoomServer } from "./embedded/room-server.js";
import type { RoomBackend } from "./types.js";

/** Key name (`iss`) of tokens the embedded room server mints for itself. */
const EMBEDDED_API_KEY = "relay-embedded";

/** The configured room back-end: LiveKit when it is configured, the embedded room server otherwise. */
export async function createRoomBackend(
  config: Config["rooms"],
  /** In a fleet: where a room this process does not host is (embedded rooms forward there). */
  hostOf?: (roomName: string) => Promise<string | undefined>,
): Promise<RoomBackend> {
  const { backend } = config;
  if (backend.kind === "embedded") {
    return new EmbeddedRoomServer({
      keys: { apiKey: EMBEDDED_API_KEY, apiSecret: backend.secret },
      tokenTtlSec: config.tokenTtlSec,
      maxParticipants: config.maxParticipants,
      ...(hostOf ? { hostOf } : {}),
    });
  }
  // Loaded only when LiveKit is used: it pulls in LiveKit's native WebRTC library.
  const { createLiveKitBackend } = await import("./livekit/backend.js");
  return createLiveKitBackend({
    url: backend.url,
    apiKey: backend.apiKey,
    apiSecret: backend.apiSecret,
    tokenTtlSec: config.tokenTtlSec,
    emptyTimeoutSec: Math.ceil(config.emptyTimeoutMs / 1000),
    departureTimeoutSec: Math.ceil(config.departureTimeoutMs / 1000),
    // LiveKit counts the translator as a participant.
    maxParticipants: config.maxParticipants + 1,
  });
}
