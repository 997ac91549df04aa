/**
 * Why a caller was refused: no or an unknown API key ("unauthorized"), a key without the
 * entitlement ("forbidden"), or an account without the balance the request needs
 * ("insufficient_balance"). The HTTP layer maps the kind to its status and error code.
 */
export type AuthErrorKind = "unauthorized" | "forbidden" | "insufficient_balance";

export class AuthError extends Error {
  constructor(
    readonly kind: AuthErrorKind,
    message: string,
  ) {
    super(message);
    this.name = "AuthError";
  }
}
