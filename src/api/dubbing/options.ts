import type { FastifyRequest } from "fastify";
import type { Accounts } from "../../auth/accounts.js";
import type { Database } from "../../db/types.js";
import type { EngineRegistry } from "../../engines/routing/registry.js";
import type { ObjectStore } from "../../storage/types.js";
import type { AccountRateLimit } from "../rate-limit.js";

/** What the dubbing routes (src/api/dubbing/routes.ts) are built with. */
export interface DubbingRouteOptions {
  readonly db: Database;
  readonly store: ObjectStore;
  readonly accounts: Accounts;
  readonly registry: EngineRegistry;
  readonly publicBaseUrl: (request: FastifyRequest) => string;
  readonly maxFileBytes: number;
  readonly maxDurationSec: number;
  /** Where S3 uploads are copied to be probed at job creation. */
  readonly workDir: string;
  /** Jobs one account may have pending or running. */
  readonly jobsPerAccount: number;
  /** How long creation may spend reading a `source_url`'s duration, and whether it may be private. */
  readonly sourceProbeMs: number;
  readonly allowPrivateSources: boolean;
  /** The per-account limit shared with room sessions. */
  readonly rateLimit: AccountRateLimit;
  /** Upload URL lifetime, per-account storage quota and how long results are kept. */
  readonly retention: {
    readonly uploadUrlTtlSec: number;
    readonly quotaBytes: number;
    readonly resultRetentionMs: number;
  };
}
