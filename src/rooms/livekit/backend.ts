import { RoomServiceClient, TwirpError } from "livekit-server-sdk";
import { mintRoomToken, type RoomTokenKeys } from "../tokens.js";
import {
  TRANSLATOR_IDENTITY,
  type RoomAccess,
  type RoomBackend,
  type RoomConnection,
  type RoomMember,
} from "../types.js";
import { connectLiveKitRoom, releaseLiveKitRuntime, type LiveKitRoomConnection } from "./connection.js";

/**
 * Rooms on a LiveKit server: created through LiveKit's room service (Twirp over HTTP), joined by
 * clients with tokens minted here, and by the translator through @livekit/rtc-node.
 */

export interface LiveKitOptions {
  /** The LiveKit server's ws(s):// URL, as clients reach it (returned to them as `url`). */
  url: string;
  apiKey: string;
  apiSecret: string;
  tokenTtlSec: number;
  /** seconds LiveKit keeps a room nobody joined */
  emptyTimeoutSec: number;
  /** Participants a room admits at once, the translator included (0: no limit). */
  maxParticipants: number;
  /** Seconds LiveKit keeps a room after its last participant left (default 20). */
  departureTimeoutSec?: number;
  /** How long the translator waits for its join to complete (default 10 s). */
  joinTimeoutMs?: number;
}

/** Seconds LiveKit keeps a room once its last participant left, by default (a grace period to rejoin). */
const DEPARTURE_TIMEOUT_SEC = 20;
/** Seconds a room-service call may take. */
const ROOM_SERVICE_TIMEOUT_SEC = 10;

/** The room service's base URL: the LiveKit URL with ws(s) turned into http(s). */
export function roomServiceUrl(url: string): string {
  return url.replace(/^ws(s?):\/\//iu, "http$1://");
}

function describe(error: unknown): string {
  if (error instanceof TwirpError) {
    return `${error.status}${error.code ? ` ${error.code}` : ""}: ${error.message}`;
  }
  const message = (error as Error).message;
  // fetch's "fetch failed" hides the reason (refused, DNS, TLS) in its cause.
  const cause = ((error as Error).cause as Error | undefined)?.message;
  return cause && !message.includes(cause) ? `${message} (${cause})` : message;
}

/** LiveKit answers a room it does not have with the Twirp code not_found (a bare 404 is no LiveKit). */
function isNotFound(error: unknown): boolean {
  return error instanceof TwirpError && error.code === "not_found";
}

export function createLiveKitBackend(options: LiveKitOptions): RoomBackend {
  const keys: RoomTokenKeys = { apiKey: options.apiKey, apiSecret: options.apiSecret };
  const serviceUrl = roomServiceUrl(options.url);
  const rooms = new RoomServiceClient(serviceUrl, options.apiKey, options.apiSecret, {
    requestTimeout: ROOM_SERVICE_TIMEOUT_SEC,
  });
  /** Translator connections still open, by room. */
  const connections = new Map<string, Set<LiveKitRoomConnection>>();
  let closed = false;

  function ensureOpen(): void {
    if (closed) throw new Error("the LiveKit room back-end is closed");
  }

  function track(roomName: string, connection: LiveKitRoomConnection): RoomConnection {
    let open = connections.get(roomName);
    if (!open) connections.set(roomName, (open = new Set()));
    open.add(connection);
    void connection.closed.then(() => {
      open.delete(connection);
      if (open.size === 0 && connections.get(roomName) === open) connections.delete(roomName);
    });
    return connection;
  }

  async function leaveRoom(roomName: string): Promise<void> {
    await Promise.all([...(connections.get(roomName) ?? [])].map((connection) => connection.leave()));
  }

  return {
    kind: "livekit",

    async createRoom(roomName: string): Promise<void> {
      ensureOpen();
      try {
        // Idempotent: LiveKit answers with the existing room when the name is taken.
        await rooms.createRoom({
          name: roomName,
          emptyTimeout: options.emptyTimeoutSec,
          departureTimeout: options.departureTimeoutSec ?? DEPARTURE_TIMEOUT_SEC,
          maxParticipants: options.maxParticipants,
        });
      } catch (error) {
        throw new Error(
          `LiveKit room service at ${serviceUrl} could not create room "${roomName}": ${describe(error)}`,
          { cause: error },
        );
      }
    },

    async clientAccess(roomName: string, client: RoomMember): Promise<RoomAccess> {
      ensureOpen();
      const token = await mintRoomToken(keys, {
        roomName,
        identity: client.identity,
        ...(client.language === undefined ? {} : { language: client.language }),
        ...(client.name === undefined ? {} : { name: client.name }),
        role: "client",
        ttlSec: options.tokenTtlSec,
      });
      return { url: options.url, token };
    },

    // Whether it speaks needs no saying: the translator publishes the tracks it speaks on.
    async joinAsTranslator(roomName: string): Promise<RoomConnection> {
      ensureOpen();
      const token = await mintRoomToken(keys, {
        roomName,
        identity: TRANSLATOR_IDENTITY,
        role: "translator",
        ttlSec: options.tokenTtlSec,
      });
      let connection: LiveKitRoomConnection;
      try {
        connection = await connectLiveKitRoom(options.url, token, { timeoutMs: options.joinTimeoutMs });
      } catch (error) {
        throw new Error(`the translator could not join LiveKit room "${roomName}": ${describe(error)}`, {
          cause: error,
        });
      }
      if (closed) {
        await connection.leave();
        throw new Error("the LiveKit room back-end is closed");
      }
      return track(roomName, connection);
    },

    async deleteRoom(roomName: string): Promise<void> {
      // The translator leaves first, cleanly, rather than being thrown out by the server.
      await leaveRoom(roomName);
      try {
        await rooms.deleteRoom(roomName);
      } catch (error) {
        if (isNotFound(error)) return;
        throw new Error(
          `LiveKit room service at ${serviceUrl} could not delete room "${roomName}": ${describe(error)}`,
          { cause: error },
        );
      }
    },

    async close(): Promise<void> {
      closed = true;
      await Promise.all([...connections.keys()].map(leaveRoom));
      await releaseLiveKitRuntime();
    },
  };
}
