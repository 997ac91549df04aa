import type { Account, AccountsRepository } from "../db/types.js";
import { AuthError } from "./errors.js";

export { AuthError, type AuthErrorKind } from "./errors.js";

export type Entitlement = "realtime" | "rooms" | "dubbing";

/** Bearer API keys, checked against the hashed keys in the database. */
export class Accounts {
  constructor(private readonly repository: AccountsRepository) {}

  /** Resolves `Authorization: Bearer <key>` and checks the entitlement (AuthError unauthorized / forbidden). */
  async authenticate(header: string | undefined, entitlement: Entitlement): Promise<Account> {
    const match = /^Bearer\s+(\S+)\s*$/iu.exec(header ?? "");
    if (!match) throw new AuthError("unauthorized", "missing API key: send 'Authorization: Bearer <key>'");
    const account = await this.repository.findByKey(match[1]!);
    if (!account) throw new AuthError("unauthorized", "invalid API key");
    if (!account.entitlements.includes(entitlement)) {
      throw new AuthError("forbidden", `this API key is not entitled to ${entitlement}`);
    }
    return account;
  }

  /**
   * AuthError insufficient_balance unless the account's available balance (its balance less what its unfinished dubbing jobs
   * hold) is at least `requiredUsd` (and positive).
   */
  async requireBalance(account: Account, requiredUsd = 0): Promise<number> {
    const available = await this.repository.availableUsd(account.id);
    if (available <= 0 || available < requiredUsd) {
      throw new AuthError(
        "insufficient_balance",
        `the account's available balance (${available.toFixed(2)} USD, after what its unfinished jobs ` +
          "hold) cannot cover this; top it up to continue",
      );
    }
    return available;
  }
}
