import type { FastifyRequest, preValidationAsyncHookHandler } from "fastify";
import type { Accounts, Entitlement } from "../auth/accounts.js";
import type { Account } from "../db/types.js";

/**
 * A `preValidation` hook authenticating the caller: a request without a valid key is refused
 * (401 / 403) before its body or query is validated, so an anonymous caller learns nothing from
 * the validation errors.
 */
export function authenticated(accounts: Accounts, entitlement: Entitlement): preValidationAsyncHookHandler {
  return async (request) => {
    request.account = await accounts.authenticate(request.headers.authorization, entitlement);
  };
}

/** The account the route's `authenticated` hook resolved. */
export function accountOf(request: FastifyRequest): Account {
  if (!request.account) throw new Error("route has no authenticated() preValidation hook");
  return request.account;
}

declare module "fastify" {
  interface FastifyRequest {
    account?: import("../db/types.js").Account;
  }
}
