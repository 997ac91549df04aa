import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { FastifyBaseLogger } from "fastify";
import { ConfigError, type Config } from "../config.js";
import type { Database, ProcessRecord } from "../db/types.js";

/**
 * The processes serving one database form a fleet. Each keeps a row in the database's `processes`
 * table up to date (a heartbeat every `HEARTBEAT_MS`): its address, its live sessions and
 * capacity, and a description of the setup every process must share. A process not seen for
 * `STALE_MS` (killed, partitioned) drops out by itself; one that shuts down removes its row. The
 * same rule frees what a process held in Redis (its live-session slots): the others drop it after
 * a heartbeat that finds the process gone (`onBeat`).
 *
 * The database is the meeting point because a fleet must share it anyway (jobs, accounts); the
 * short-lived state the processes share (sessions waiting to be claimed, request budgets, where
 * each room is hosted) is in Redis.
 */

export const HEARTBEAT_MS = 2_000;
export const STALE_MS = 10_000;
/** Rows of processes gone this long are deleted, so the table holds only recent processes. */
const FORGET_MS = 60 * 60_000;

/**
 * A process of the fleet as what it holds beside the table (live-session slots in Redis) is filed
 * under: its worker id and start time, so a restart under the same WORKER_ID is another member.
 */
export function memberId(process: Pick<ProcessRecord, "workerId" | "startedAt">): string {
  return `${process.workerId}@${process.startedAt}`;
}

/** What a heartbeat that reached the database learned, for what the fleet shares beside it. */
export interface FleetBeat {
  /** When this process was seen (what it wrote in its row). */
  readonly seenAt: number;
  /** The members alive (`memberId`), this one included: those seen at or after `staleBefore`. */
  readonly live: readonly string[];
  /** A member not seen since is gone: what it held is free. */
  readonly staleBefore: number;
}

/** This process's load as the heartbeat reports it. */
export interface ProcessLoad {
  readonly live: number;
  readonly capacity: number;
  readonly draining: boolean;
}

/**
 * What every process of a fleet must have in common, each part reduced to something comparable
 * that reveals no secret (secrets appear as 32-bit fingerprints).
 */
export interface SharedSetup {
  /** SESSION_SECRET: every process must verify every other's `ws_url`. */
  readonly sessionSecret: string;
  /** The object store: an upload to one process must be readable by the worker on another. */
  readonly storage: string;
  /** Redis: unclaimed sessions, request budgets and the room directory. */
  readonly redis: string;
  /** The room back-end: room tokens minted by one process must open rooms on every other. */
  readonly rooms: string;
}

/** A configuration the other processes of the fleet cannot work with; says what to change. */
export class FleetSetupError extends ConfigError {}

/** Marker file naming an embedded object store, so processes can tell whether they share it. */
const STORE_ID_FILE = ".relay-store-id";

/** `storageSecret`: the embedded store's signing key as resolved (configured, or kept in DATA_DIR). */
export async function describeSharedSetup(
  config: Config,
  storageSecret: string | undefined,
): Promise<SharedSetup> {
  const { storage, rooms, redis } = config;
  return {
    sessionSecret: fingerprint(config.sessionSecret),
    storage:
      storage.kind === "s3"
        ? `s3 ${storage.endpoint ?? "aws"} ${storage.bucket}`
        : `embedded store ${await storeId(storage.dir)} signing ${fingerprint(storageSecret ?? "")}`,
    redis: redis ? `${redisLocation(redis.url)} prefix ${redis.keyPrefix}` : "none",
    rooms:
      rooms.backend.kind === "livekit"
        ? `livekit ${rooms.backend.url} ${rooms.backend.apiKey}`
        : `embedded ${fingerprint(rooms.backend.secret)}`,
  };
}

export class FleetMembership {
  private others: readonly ProcessRecord[] = [];
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> = Promise.resolve();

  private constructor(
    private readonly db: Database,
    private readonly self: {
      readonly workerId: string;
      readonly startedAt: number;
      readonly address: string;
      readonly setup: string;
    },
    private readonly load: () => ProcessLoad,
    private readonly log: FastifyBaseLogger,
    private readonly onBeat: (beat: FleetBeat) => void,
  ) {}

  /**
   * Joins the fleet of `db`: refuses (FleetSetupError) when a live process has a setup this one
   * cannot work with, then starts the heartbeat. `onBeat` follows each heartbeat that reached the
   * database (the first before this resolves).
   */
  static async join(options: {
    readonly db: Database;
    readonly workerId: string;
    /** When this process started: with `workerId`, names it (`memberId`). */
    readonly startedAt: number;
    readonly address: string;
    readonly setup: SharedSetup;
    readonly load: () => ProcessLoad;
    readonly log: FastifyBaseLogger;
    readonly onBeat?: (beat: FleetBeat) => void;
  }): Promise<FleetMembership> {
    const { db, workerId, setup, log } = options;
    const recentOthers = async () =>
      (await db.processes.seenSince(Date.now() - STALE_MS)).filter(
        (process) => process.workerId !== workerId,
      );
    const differs = (process: ProcessRecord) => setupProblems(setup, [process]).length > 0;
    let others = await recentOthers();
    if (others.some(differs)) {
      // A process killed moments ago (a crash, kill -9, a supervisor restarting this very service
      // with a new random SESSION_SECRET) keeps a recent row. Live processes beat every
      // HEARTBEAT_MS: one set up differently counts only if it beats again meanwhile.
      const seen = new Map(others.map((process) => [process.workerId, process.seenAt]));
      await sleep(HEARTBEAT_MS * 1.5);
      others = (await recentOthers()).filter((process) => {
        if (!differs(process) || process.seenAt > (seen.get(process.workerId) ?? -Infinity)) return true;
        log.warn(
          { worker: process.workerId },
          "a process set up differently stopped beating: taken for gone",
        );
        return false;
      });
    }
    const problems = setupProblems(setup, others);
    if (problems.length > 0) {
      throw new FleetSetupError(
        `this process cannot join the processes already using this database ` +
          `(${others.map((process) => process.workerId).join(", ")}):\n  ${problems.join("\n  ")}`,
      );
    }
    const membership = new FleetMembership(
      db,
      { workerId, startedAt: options.startedAt, address: options.address, setup: JSON.stringify(setup) },
      options.load,
      log,
      options.onBeat ?? (() => undefined),
    );
    membership.others = others;
    await membership.beat();
    membership.timer = setInterval(() => void membership.beat(), HEARTBEAT_MS).unref();
    return membership;
  }

  /** Whether some process could take one more session: this one now, or another at its last heartbeat. */
  hasRoom(): boolean {
    const own = this.load();
    if (!own.draining && own.live < own.capacity) return true;
    const since = Date.now() - STALE_MS;
    return this.others.some(
      (process) => process.seenAt >= since && !process.draining && process.live < process.capacity,
    );
  }

  /** The address of a live process of the fleet (this one included). */
  addressOf(workerId: string): string | undefined {
    if (workerId === this.self.workerId) return this.self.address;
    const since = Date.now() - STALE_MS;
    return this.others.find((process) => process.workerId === workerId && process.seenAt >= since)?.address;
  }

  /** Live processes, this one included. */
  get size(): number {
    const since = Date.now() - STALE_MS;
    return 1 + this.others.filter((process) => process.seenAt >= since).length;
  }

  /** Leaves at once (shutdown): the others stop counting this process's capacity. */
  async leave(): Promise<void> {
    clearInterval(this.timer);
    await this.beating;
    await this.db.processes.remove(this.self.workerId).catch(() => undefined);
  }

  private beat(): Promise<void> {
    this.beating = this.beating.then(async () => {
      try {
        const now = Date.now();
        await this.db.processes.beat({
          ...this.self,
          sharedSetup: this.self.setup,
          ...this.load(),
          seenAt: now,
        });
        this.others = (await this.db.processes.seenSince(now - STALE_MS)).filter(
          (process) => process.workerId !== this.self.workerId,
        );
        // Not awaited: what follows a beat (Redis) must not hold up the next one.
        this.onBeat({
          seenAt: now,
          live: [this.self, ...this.others].map(memberId),
          staleBefore: now - STALE_MS,
        });
        await this.db.processes.forgetUnseenSince(now - FORGET_MS);
      } catch (error) {
        // The database is away: keep serving with what is known; /readyz reports the database.
        this.log.warn({ err: error }, "fleet heartbeat failed");
      }
    });
    return this.beating;
  }
}

const ADVICE: Record<keyof SharedSetup, string> = {
  sessionSecret:
    "set the same SESSION_SECRET on every process (a ws_url minted by one is verified by another)",
  storage:
    "every process must use the same object store: S3-compatible storage (STORAGE_BACKEND=s3, the same " +
    "bucket), or the same DATA_DIR on a shared filesystem and the same STORAGE_SECRET",
  redis:
    "set the same REDIS_URL and REDIS_KEY_PREFIX on every process (sessions, limits and rooms are shared there)",
  rooms: "set the same ROOM_SECRET (or SESSION_SECRET) on every process, or the same LiveKit server and key",
};

function setupProblems(mine: SharedSetup, others: readonly ProcessRecord[]): string[] {
  const problems: string[] = [];
  if (others.length > 0 && mine.redis === "none") problems.push(`REDIS_URL is not set; ${ADVICE.redis}`);
  for (const key of Object.keys(ADVICE) as (keyof SharedSetup)[]) {
    if (key === "redis" && mine.redis === "none") continue;
    for (const other of others) {
      const theirs = parseSetup(other.sharedSetup);
      if (theirs?.[key] === mine[key]) continue;
      const what =
        key === "sessionSecret" || key === "rooms"
          ? ""
          : `: here ${mine[key]}, there ${theirs?.[key] ?? "?"}`;
      problems.push(`${key} differs from ${other.workerId}'s${what}; ${ADVICE[key]}`);
      break;
    }
  }
  return problems;
}

function parseSetup(text: string): Partial<SharedSetup> | undefined {
  try {
    return JSON.parse(text) as Partial<SharedSetup>;
  } catch {
    return undefined;
  }
}

/** 32 bits of SHA-256: tells two secrets apart without helping anyone guess one. */
function fingerprint(secret: string): string {
  return createHash("sha256").update(`relay fleet ${secret}`).digest("hex").slice(0, 8);
}

/** The id written once into an embedded store's directory: processes sharing the directory read the same one. */
async function storeId(dir: string): Promise<string> {
  const file = path.join(dir, STORE_ID_FILE);
  await mkdir(dir, { recursive: true });
  await writeFile(file, randomBytes(8).toString("hex"), { flag: "wx" }).catch(
    (error: NodeJS.ErrnoException) => {
      if (error.code !== "EEXIST") throw error;
    },
  );
  return (await readFile(file, "utf8")).trim();
}

/** Host, port and database of a Redis URL, without credentials. */
function redisLocation(url: string): string {
  const parsed = new URL(url);
  return `${parsed.protocol}//${parsed.hostname}:${parsed.port || "6379"}${parsed.pathname || "/0"}`;
}
