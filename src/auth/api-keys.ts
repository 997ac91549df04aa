import { createHash, timingSafeEqual } from "node:crypto";
import { ApiError } from "../api/errors.js";

export type Entitlement = "realtime" | "rooms" | "dubbing";

export interface Account {
  readonly keyId: string;
  readonly entitlements: ReadonlySet<string>;
  balanceUsd: number;
}

/**
 * API keys from configuration (`API_KEYS`), each with a development balance. Keys are held only
 * as SHA-256 digests and compared in constant time.
 */
export class ApiKeyStore {
  private readonly accounts = new Map<string, Account>();

  constructor(keys: readonly { key: string; balanceUsd: number; entitlements: readonly string[] }[]) {
    for (const { key, balanceUsd, entitlements } of keys) {
      const digest = digestOf(key);
      this.accounts.set(digest.toString("hex"), {
        keyId: digest.toString("hex").slice(0, 12),
        entitlements: new Set(entitlements),
        balanceUsd,
      });
    }
  }

  /** Resolves `Authorization: Bearer <key>` and checks entitlement and balance (401 / 403 / 402). */
  authorize(header: string | undefined, entitlement: Entitlement): Account {
    const match = /^Bearer\s+(\S+)\s*$/iu.exec(header ?? "");
    if (!match)
      throw new ApiError(401, "unauthorized", "missing API key: send 'Authorization: Bearer <key>'");
    const digest = digestOf(match[1]!);
    const account = this.lookup(digest);
    if (!account) throw new ApiError(401, "unauthorized", "invalid API key");
    if (!account.entitlements.has(entitlement)) {
      throw new ApiError(403, "forbidden", `this API key is not entitled to ${entitlement}`);
    }
    if (account.balanceUsd <= 0) {
      throw new ApiError(
        402,
        "insufficient_balance",
        "the account balance is exhausted; top it up to continue",
      );
    }
    return account;
  }

  private lookup(digest: Buffer): Account | undefined {
    for (const [hex, account] of this.accounts) {
      if (timingSafeEqual(Buffer.from(hex, "hex"), digest)) return account;
    }
    return undefined;
  }
}

function digestOf(key: string): Buffer {
  return createHash("sha256").update(key).digest();
}
