import { randomBytes } from "node:crypto";
import type { FastifyBaseLogger } from "fastify";
import type { EngineRegistry } from "../engines/routing/registry.js";
import type { LanguageCode, Voice } from "../core/contracts.js";
import { roomParticipantBound } from "./room-languages.js";
import type { RoomDirectory } from "../fleet/room-directory.js";
import { AccountSessionsLimitError, type LiveSession, type SessionCapacity } from "../sessions/capacity.js";
import { Invitations, type Invitation } from "./invites.js";
import type { PaceOptions } from "../pipeline/pacing.js";
import { RoomTranslator } from "./translator.js";
import type { RoomAccess, RoomBackend, RoomEndReason, RoomLanguages } from "./types.js";

export interface RoomsOptions {
  readonly registry: EngineRegistry;
  /**
   * Rooms count against the same per-process capacity and per-account bound as WebSocket
   * sessions, and end when their API key is revoked.
   */
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
  /** Participants one room admits (ROOM_MAX_PARTICIPANTS), before `roomParticipantBound` lowers it for many languages. */
  readonly maxParticipants: number;
  /** Signs meetings' share links (src/rooms/invites.ts): the same secret on every process of a fleet. */
  readonly invitationSecret: string;
  /** In a fleet: where each room is hosted, so any process can grant access to it or end it. */
  readonly fleet?: {
    readonly directory: RoomDirectory;
    readonly workerId: string;
    /** The address of a live process of the fleet (undefined when it is gone). */
    readonly addressOf: (workerId: string) => string | undefined;
  };
}

export interface RoomRequest {
  readonly accountId: string;
  readonly room: RoomLanguages;
  /** The creator's own language (the first participant's token carries it); undefined: none declared. */
  readonly language: LanguageCode | undefined;
  /** The translator's voice; undefined: it publishes transcripts only, no speech. */
  readonly voice: Voice | "clone" | undefined;
  /** How its speech keeps pace with the listeners (src/pipeline/pacing.ts); undefined: natural speed. */
  readonly pace: PaceOptions | undefined;
  /** Names and jargon for every speaker's recognition and translation (src/core/glossary.ts). */
  readonly context: string;
}

export interface CreatedRoom extends RoomAccess {
  readonly roomName: string;
  readonly identity: string;
  readonly language: LanguageCode | undefined;
  /** The participant's share link code (src/rooms/invites.ts), valid while the room is open. */
  readonly invitation: string;
}

/** What each ending means to the people of the room: the one wording, for logs and pages. */
export const ROOM_ENDINGS: Readonly<Record<RoomEndReason, string>> = {
  owner: "the person who created it ended it",
  empty: "nobody was in it",
  lifetime: "it reached the longest a meeting may last here",
  translator: "its translator lost the connection to the room",
  revoked: "the API key that created it was revoked",
  shutdown: "the service shut down",
};

/** What a share link leads to now (`Rooms.invitationState`). */
export type InvitationState =
  | {
      readonly state: "open";
      readonly invitation: Invitation;
      /** The room's languages; undefined when another process of the fleet hosts it. */
      readonly languages: RoomLanguages | undefined;
    }
  | {
      readonly state: "ended";
      readonly invitation: Invitation;
      /** Undefined once the ending is forgotten (`maxLifetimeMs` after it). */
      readonly reason: RoomEndReason | undefined;
    };

/**
 * How long one check from the creator's open page keeps an empty meeting open (at least
 * `emptyTimeoutMs`): browsers run the timers of a tab left in the background only once a minute,
 * so the page's checks may come that far apart.
 */
const HOST_PRESENCE_MS = 3 * 60_000;
/** Display names are cut to this many characters (they label captions and the participant list). */
export const MAX_NAME_LENGTH = 40;

/**
 * A name as a person typed it, fit to show others: control and format characters (bidi overrides
 * included) become spaces, runs of space one, at most MAX_NAME_LENGTH characters; undefined when
 * nothing is left. Pages show it as text, never as markup.
 */
export function displayName(raw: string): string | undefined {
  const plain = raw
    .replace(/\p{Cc}|\p{Cf}|\p{Zl}|\p{Zp}/gu, " ")
    .replace(/\s+/gu, " ")
    .trim();
  const name = [...plain].slice(0, MAX_NAME_LENGTH).join("").trim();
  return name === "" ? undefined : name;
}

interface OpenRoom {
  readonly accountId: string;
  readonly room: RoomLanguages;
  readonly speaks: boolean;
  /** Participants given access, by identity: bounded by `roomParticipantBound` (each costs a pipeline). */
  readonly granted: Set<string>;
  readonly translator: RoomTranslator;
  readonly live: LiveSession;
  readonly timers: NodeJS.Timeout[];
  idleTimer: NodeJS.Timeout | undefined;
}

/** What an owner's request to end a room came to (`endByOwner`). */
export type RoomEnding =
  | { readonly kind: "ended" }
  /** No such room, or not this account's: the two are not told apart. */
  | { readonly kind: "not_found" }
  /** Open on another process of the fleet, at `address`: the request is that process's to serve. */
  | { readonly kind: "elsewhere"; readonly address: string };

const ENDED: RoomEnding = { kind: "ended" };
const NOT_FOUND: RoomEnding = { kind: "not_found" };

/** The names this service gives rooms; any other name is no room of ours. */
const ROOM_NAME = /^api-[0-9a-f]{20}$/u;

/**
 * The directory entry remembering who owned an ended room (a name no room has: it never collides
 * with a room's own entry, and no token can be minted for it).
 */
const endedEntry = (roomName: string) => `ended:${roomName}`;

export class RoomCapacityError extends Error {}

/**
 * The room server (LiveKit) could not create the room or let the translator in: wrong keys, an
 * unreachable or dead server. The message says what it answered (its URL is the clients' own).
 */
export class RoomServerError extends Error {}

/** The room has given out all the access it may (participants, and the translation work they bring). */
export class RoomFullError extends Error {}

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
  /**
   * Without a fleet: the owners of rooms that ended, kept `maxLifetimeMs` after the end so ending
   * one again succeeds (in a fleet the directory remembers them). Ordered by end time.
   */
  private readonly ended = new Map<
    string,
    { readonly accountId: string; readonly reason: RoomEndReason; readonly until: number }
  >();
  private readonly invitations: Invitations;

  constructor(
    readonly backend: RoomBackend,
    private readonly options: RoomsOptions,
  ) {
    this.invitations = new Invitations(options.invitationSecret);
  }

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
    const live: LiveSession = {
      id: roomName,
      accountId,
      // Closed by the sessions' capacity when the account's API key is revoked.
      close: () => void this.end(roomName, "revoked"),
    };
    if (!sessions.open(live)) throw new RoomCapacityError("no room capacity right now");
    const identity = clientIdentity();
    const creator = { identity, ...(request.language === undefined ? {} : { language: request.language }) };
    this.creating.set(accountId, (this.creating.get(accountId) ?? 0) + 1);
    try {
      if (!(await sessions.reserve(live))) throw new AccountSessionsLimitError(sessions.perAccount);
      await this.backend.createRoom(roomName, request.room).catch((error: unknown) => {
        throw new RoomServerError((error as Error).message, { cause: error });
      });
      await this.options.fleet?.directory.register(
        roomName,
        { workerId: this.options.fleet.workerId, accountId },
        this.options.maxLifetimeMs,
      );
      const access = await this.backend.clientAccess(roomName, creator, publicBaseUrl);
      const connection = await this.backend
        .joinAsTranslator(roomName, { speaks: request.voice !== undefined })
        .catch((error: unknown) => {
          throw new RoomServerError((error as Error).message, { cause: error });
        });
      const translator = new RoomTranslator(connection, {
        registry,
        room: request.room,
        voice: request.voice,
        pace: request.pace,
        context: request.context,
        account: request.accountId,
        log: log.child({ room: roomName }),
        onEmpty: () => this.closeWhenIdle(roomName, this.options.departureTimeoutMs),
      });
      const room: OpenRoom = {
        accountId: request.accountId,
        room: request.room,
        speaks: request.voice !== undefined,
        granted: new Set([identity]),
        translator,
        live,
        timers: [setTimeout(() => void this.end(roomName, "lifetime"), this.options.maxLifetimeMs)],
        idleTimer: undefined,
      };
      this.open.set(roomName, room);
      this.closeWhenIdle(roomName, this.options.emptyTimeoutMs);
      void translator.run().then(() => this.end(roomName, "translator"));
      const invitation = this.invitations.encode({
        roomName,
        identity,
        language: request.language,
        host: true,
      });
      return { ...access, roomName, identity, language: request.language, invitation };
    } catch (error) {
      if (error instanceof RoomServerError) log.warn({ err: error, room: roomName }, "room server failed");
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

  /**
   * An open room this account created (hosted by this process): its languages, and whether its
   * translator speaks; undefined: none.
   */
  openRoom(
    roomName: string,
    accountId: string,
  ): { readonly languages: RoomLanguages; readonly speaks: boolean } | undefined {
    const room = this.open.get(roomName);
    return room?.accountId === accountId ? { languages: room.room, speaks: room.speaks } : undefined;
  }

  /**
   * Another participant's access to a room the account created; undefined when there is no such
   * room. `language`: the language they speak and hear (the caller checked it is the room's).
   * Throws `RoomFullError` once the room has given out its share of access (`roomParticipantBound`).
   */
  async grantParticipantAccess(
    roomName: string,
    accountId: string,
    publicBaseUrl: string,
    language?: LanguageCode,
  ): Promise<CreatedRoom | undefined> {
    if (!ROOM_NAME.test(roomName)) return undefined;
    const room = this.open.get(roomName);
    const owner = room?.accountId ?? (await this.options.fleet?.directory.lookup(roomName))?.accountId;
    if (owner !== accountId) return undefined;
    if (room) {
      const participants = roomParticipantBound(room.room, this.options.maxParticipants);
      if (room.granted.size >= participants) {
        throw new RoomFullError(
          `room ${roomName} has given access to ${room.granted.size} participants, the most a room ` +
            `in ${room.room.languages.length} languages holds (${participants}); ` +
            "a participant who left rejoins with the link they were given",
        );
      }
    }
    const identity = clientIdentity();
    room?.granted.add(identity);
    const access = await this.backend.clientAccess(
      roomName,
      { identity, ...(language === undefined ? {} : { language }) },
      publicBaseUrl,
    );
    const invitation = this.invitations.encode({ roomName, identity, language, host: false });
    return { ...access, roomName, identity, language, invitation };
  }

  /**
   * What a share link leads to: an open room or an ended one (undefined: not a link of this
   * service). The creator's own link, checked by their open page, keeps an empty room open
   * (HOST_PRESENCE_MS): a meeting waits for its people while its creator waits.
   */
  async invitationState(code: string): Promise<InvitationState | undefined> {
    const invitation = this.invitations.decode(code);
    if (!invitation) return undefined;
    const { roomName } = invitation;
    const room = this.open.get(roomName);
    if (room) {
      if (invitation.host && room.translator.participantCount === 0)
        this.closeWhenIdle(roomName, Math.max(this.options.emptyTimeoutMs, HOST_PRESENCE_MS));
      return { state: "open", invitation, languages: room.room };
    }
    const directory = this.options.fleet?.directory;
    if (await directory?.lookup(roomName)) return { state: "open", invitation, languages: undefined };
    return { state: "ended", invitation, reason: (await this.endedRoom(roomName))?.reason };
  }

  /**
   * A fresh room token for a share link's participant (ROOM_TOKEN_TTL_SEC), named `name` for the
   * others: a link opens its room for as long as the room is open, as the same participant.
   */
  async redeem(
    state: InvitationState & { readonly state: "open" },
    name: string | undefined,
    publicBaseUrl: string,
  ): Promise<CreatedRoom> {
    const { roomName, identity, language } = state.invitation;
    const access = await this.backend.clientAccess(
      roomName,
      {
        identity,
        ...(language === undefined ? {} : { language }),
        ...(name === undefined ? {} : { name }),
      },
      publicBaseUrl,
    );
    return { ...access, roomName, identity, language, invitation: this.invitations.encode(state.invitation) };
  }

  /**
   * Ends a room for the account that created it: everyone is disconnected and its session slot is
   * freed. Ending a room that has already ended (however it ended) succeeds again for its owner.
   * `forwarded`: the request was passed here by another process, and is not passed on again.
   */
  async endByOwner(roomName: string, accountId: string, forwarded = false): Promise<RoomEnding> {
    if (!ROOM_NAME.test(roomName)) return NOT_FOUND;
    const room = this.open.get(roomName);
    if (room) {
      if (room.accountId !== accountId) return NOT_FOUND;
      await this.end(roomName, "owner");
      return ENDED;
    }
    const fleet = this.options.fleet;
    const location = await fleet?.directory.lookup(roomName);
    if (fleet && location) {
      if (location.accountId !== accountId) return NOT_FOUND;
      const address = location.workerId === fleet.workerId ? undefined : fleet.addressOf(location.workerId);
      if (address) return forwarded ? NOT_FOUND : { kind: "elsewhere", address };
      // Its host is gone (killed, or this process before a restart): only LiveKit's room and the entry remain.
      await this.backend.deleteRoom(roomName);
      await this.rememberEnded(roomName, accountId, "owner");
      await fleet.directory.remove(roomName);
      return ENDED;
    }
    return (await this.endedRoom(roomName))?.accountId === accountId ? ENDED : NOT_FOUND;
  }

  /** Closes every room (shutdown). */
  async close(): Promise<void> {
    await Promise.all([...this.open.keys()].map((name) => this.end(name, "shutdown")));
    await this.backend.close();
  }

  /** Closes the room unless someone is (back) in it `afterMs` from now. */
  private closeWhenIdle(roomName: string, afterMs: number): void {
    const room = this.open.get(roomName);
    if (!room) return;
    clearTimeout(room.idleTimer);
    room.idleTimer = setTimeout(() => {
      if (room.translator.participantCount === 0) void this.end(roomName, "empty");
      else room.idleTimer = undefined;
    }, afterMs);
  }

  private async end(roomName: string, reason: RoomEndReason): Promise<void> {
    const room = this.open.get(roomName);
    if (!room) return;
    this.open.delete(roomName);
    for (const timer of [...room.timers, room.idleTimer]) clearTimeout(timer);
    this.options.sessions.ended(room.live);
    this.options.log.info({ room: roomName, reason: ROOM_ENDINGS[reason] }, "room closed");
    // Remembered before the room's own entry goes, so a second end never finds neither.
    await this.rememberEnded(roomName, room.accountId, reason).catch((error: unknown) => {
      this.options.log.warn({ err: error, room: roomName }, "ended room could not be remembered");
    });
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

  private async rememberEnded(roomName: string, accountId: string, reason: RoomEndReason): Promise<void> {
    const { fleet, maxLifetimeMs } = this.options;
    if (fleet) {
      await fleet.directory.register(
        endedEntry(roomName),
        { workerId: fleet.workerId, accountId, endedReason: reason },
        maxLifetimeMs,
      );
      return;
    }
    const now = Date.now();
    for (const [name, entry] of this.ended) {
      if (entry.until > now) break;
      this.ended.delete(name);
    }
    this.ended.set(roomName, { accountId, reason, until: now + maxLifetimeMs });
  }

  /** Who owned a room that ended, and why it ended (undefined: no ending remembered). */
  private async endedRoom(
    roomName: string,
  ): Promise<{ readonly accountId: string; readonly reason: RoomEndReason | undefined } | undefined> {
    const { fleet } = this.options;
    if (fleet) {
      const entry = await fleet.directory.lookup(endedEntry(roomName));
      return entry && { accountId: entry.accountId, reason: entry.endedReason };
    }
    const entry = this.ended.get(roomName);
    return entry && entry.until > Date.now() ? entry : undefined;
  }
}

function clientIdentity(): string {
  return `client-${randomBytes(6).toString("hex")}`;
}
