import { randomBytes } from "node:crypto";
import type { FastifyBaseLogger } from "fastify";
import type { EngineRegistry } from "../engines/registry.js";
import type { LanguageCode, Voice } from "../engines/types.js";
import type { RoomDirectory } from "../fleet/room-directory.js";
import type { LiveSession, SessionCapacity } from "../sessions/capacity.js";
import { RoomTranslator } from "./translator.js";
import type { RoomAccess, RoomBackend } from "./types.js";

export interface RoomsOptions {
  readonly registry: EngineRegistry;
  /** Rooms count against the same per-process capacity as WebSocket sessions. */
  readonly sessions: SessionCapacity;
  readonly log: FastifyBaseLogger;
  /** A room is closed this long after creation whatever happens in it. */
  readonly maxLifetimeMs: number;
  /** A room nobody has joined is closed after this long. */
  readonly emptyTimeoutMs: number;
  /**
   * Rooms nobody is in that one account may hold at once: each holds a session slot, so without
   * this bound one account could fill the capacity with rooms it never joins.
   */
  readonly emptyPerAccount: number;
  /** A room is closed this long after its last participant left, unless someone (re)joins. */
  readonly departureTimeoutMs: number;
  /** In a fleet: where each room is hosted, so any process can grant access to it. */
  readonly fleet?: { readonly directory: RoomDirectory; readonly workerId: string };
}

export interface RoomRequest {
  readonly accountId: string;
  readonly sourceLanguage: LanguageCode;
  readonly targetLanguage: LanguageCode;
  readonly voice: Voice | "clone";
}

export interface CreatedRoom extends RoomAccess {
  readonly roomName: string;
  readonly identity: string;
}

interface OpenRoom {
  readonly accountId: string;
  readonly translator: RoomTranslator;
  readonly live: LiveSession;
  readonly timers: NodeJS.Timeout[];
  idleTimer: NodeJS.Timeout | undefined;
}

export class RoomCapacityError extends Error {}

/** The account already holds its share of rooms nobody is in. */
export class EmptyRoomsLimitError extends Error {
  constructor(
    message: string,
    readonly retryAfterSec: number,
  ) {
    super(message);
  }
}

/**
 * The rooms this process hosts a translator for: creation (room, then translator), the grants for
 * further participants, and cleanup — when the room empties, when nobody joins, and at the
 * configured maximum lifetime.
 */
export class Rooms {
  private readonly open = new Map<string, OpenRoom>();
  /** Rooms being created, per account: they count as empty rooms before they are open. */
  private readonly creating = new Map<string, number>();

  constructor(
    readonly backend: RoomBackend,
    private readonly options: RoomsOptions,
  ) {}

  get count(): number {
    return this.open.size;
  }

  async create(request: RoomRequest, publicBaseUrl: string): Promise<CreatedRoom> {
    const { sessions, registry, log } = this.options;
    const { accountId } = request;
    const empty =
      (this.creating.get(accountId) ?? 0) +
      [...this.open.values()].filter(
        (room) => room.accountId === accountId && room.translator.participantCount === 0,
      ).length;
    if (empty >= this.options.emptyPerAccount) {
      throw new EmptyRoomsLimitError(
        `this account already has ${empty} rooms nobody has joined (the limit is ` +
          `${this.options.emptyPerAccount}); join one, or wait until an empty room closes ` +
          `(${this.options.emptyTimeoutMs / 1000} s after creation)`,
        Math.ceil(this.options.emptyTimeoutMs / 1000),
      );
    }
    const roomName = `api-${randomBytes(10).toString("hex")}`;
    const live: LiveSession = { close: () => void this.end(roomName, "server shutting down") };
    if (!sessions.open(live)) throw new RoomCapacityError("no room capacity right now");
    const identity = clientIdentity();
    this.creating.set(accountId, (this.creating.get(accountId) ?? 0) + 1);
    try {
      await this.backend.createRoom(roomName);
      await this.options.fleet?.directory.register(
        roomName,
        { workerId: this.options.fleet.workerId, accountId },
        this.options.maxLifetimeMs,
      );
      const access = await this.backend.clientAccess(roomName, identity, publicBaseUrl);
      const connection = await this.backend.joinAsTranslator(roomName);
      const translator = new RoomTranslator(connection, {
        registry,
        sourceLanguage: request.sourceLanguage,
        targetLanguage: request.targetLanguage,
        voice: request.voice,
        log: log.child({ room: roomName }),
        onEmpty: () => this.closeWhenIdle(roomName, this.options.departureTimeoutMs),
      });
      const room: OpenRoom = {
        accountId: request.accountId,
        translator,
        live,
        timers: [
          setTimeout(() => void this.end(roomName, "maximum lifetime reached"), this.options.maxLifetimeMs),
        ],
        idleTimer: undefined,
      };
      this.open.set(roomName, room);
      this.closeWhenIdle(roomName, this.options.emptyTimeoutMs);
      void translator.run().then(() => this.end(roomName, "translator left"));
      return { ...access, roomName, identity };
    } catch (error) {
      sessions.ended(live);
      await this.backend.deleteRoom(roomName).catch(() => undefined);
      await this.options.fleet?.directory.remove(roomName).catch(() => undefined);
      throw error;
    } finally {
      const stillCreating = this.creating.get(accountId)! - 1;
      if (stillCreating === 0) this.creating.delete(accountId);
      else this.creating.set(accountId, stillCreating);
    }
  }

  /** Another participant's access to a room the account created; undefined when there is no such room. */
  async grantParticipantAccess(
    roomName: string,
    accountId: string,
    publicBaseUrl: string,
  ): Promise<CreatedRoom | undefined> {
    const room = this.open.get(roomName);
    const owner = room?.accountId ?? (await this.options.fleet?.directory.lookup(roomName))?.accountId;
    if (owner !== accountId) return undefined;
    const identity = clientIdentity();
    const access = await this.backend.clientAccess(roomName, identity, publicBaseUrl);
    return { ...access, roomName, identity };
  }

  /** Closes every room (shutdown). */
  async close(): Promise<void> {
    await Promise.all([...this.open.keys()].map((name) => this.end(name, "server shutting down")));
    await this.backend.close();
  }

  /** Closes the room unless someone is (back) in it `afterMs` from now. */
  private closeWhenIdle(roomName: string, afterMs: number): void {
    const room = this.open.get(roomName);
    if (!room) return;
    clearTimeout(room.idleTimer);
    room.idleTimer = setTimeout(() => {
      if (room.translator.participantCount === 0) void this.end(roomName, "room is empty");
      else room.idleTimer = undefined;
    }, afterMs);
  }

  private async end(roomName: string, reason: string): Promise<void> {
    const room = this.open.get(roomName);
    if (!room) return;
    this.open.delete(roomName);
    for (const timer of [...room.timers, room.idleTimer]) clearTimeout(timer);
    this.options.sessions.ended(room.live);
    this.options.log.info({ room: roomName, reason }, "room closed");
    await this.options.fleet?.directory.remove(roomName).catch((error: unknown) => {
      this.options.log.warn(
        { err: error, room: roomName },
        "room could not be removed from the fleet's directory",
      );
    });
    await room.translator.close();
    await this.backend.deleteRoom(roomName).catch((error: unknown) => {
      this.options.log.warn({ err: error, room: roomName }, "room could not be deleted");
    });
  }
}

function clientIdentity(): string {
  return `client-${randomBytes(6).toString("hex")}`;
}
