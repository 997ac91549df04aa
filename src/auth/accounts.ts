import { ApiError } from "../api/errors.js";
import type { Account, AccountsRepository } from "../db/types.js";

export type Entitlement = "realtime" | "rooms" | "dubbing";

/** Bearer API keys, checked against the hashed keys in the database. */
export class Accounts {
  constructor(private readonly repository: AccountsRepository) {}

  /** Resolves `Authorization: Bearer <key>` and checks the entitlement (401 / 403). */
  async authenticate(header: string | undefined, entitlement: Entitlement): Promise<Account> {
    const match = /^Bearer\s+(\S+)\s*$/iu.exec(header ?? "");
    if (!match)
      throw new ApiError(401, "unauthorized", "missing API key: send 'Authorization: Bearer <key>'");
    const account = await this.repository.findByKey(match[1]!);
    if (!account) throw new ApiError(401, "unauthorized", "invalid API key");
    if (!account.entitlements.includes(entitlement)) {
      throw new ApiError(403, "forbidden", `this API key is not entitled to ${entitlement}`);
    }
    return account;
  }

  /**
   * 402 unless the account's available balance (its balance less what its unfinished dubbing jobs
   * hold) is at least `requiredUsd` (and positive).
   */
  async requireBalance(account: Account, requiredUsd = 0): Promise<number> {
    const available = await this.repository.availableUsd(account.id);
    if (available <= 0 || available < requiredUsd) {
      throw new ApiError(
        402,
        "insufficient_balance",
        `the account's available balance (${available.toFixed(2)} USD, after what its unfinished jobs ` +
          "hold) cannot cover this; top it up to continue",
      );
    }
    return available;
  }
}
