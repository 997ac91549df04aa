import { jwtVerify, SignJWT } from "jose";

/**
 * Signs the `ws_url` credential: an HS256 JWT naming the session, valid for `ttlSeconds`.
 * Single use is enforced by the session registry (a session can be claimed once).
 */
export class SessionTokens {
  private readonly key: Uint8Array;

  constructor(
    secret: string,
    readonly ttlSeconds = 60,
  ) {
    this.key = new TextEncoder().encode(secret);
  }

  async issue(sessionId: string): Promise<string> {
    return new SignJWT({})
      .setProtectedHeader({ alg: "HS256" })
      .setSubject(sessionId)
      .setAudience("session-ws")
      .setIssuedAt()
      .setExpirationTime(`${this.ttlSeconds}s`)
      .sign(this.key);
  }

  /** The session id, or undefined when the token is forged, malformed or expired. */
  async verify(token: string): Promise<string | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.key, { algorithms: ["HS256"], audience: "session-ws" });
      return payload.sub;
    } catch {
      return undefined;
    }
  }
}
