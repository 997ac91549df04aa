import { AccessToken, TokenVerifier, type ClaimGrants } from "livekit-server-sdk";

/**
 * Room access tokens in LiveKit's format (HS256 JWTs with a `video` grant), minted and verified
 * with LiveKit's own SDK: the same tokens open a LiveKit room or the embedded room server.
 */

export type RoomRole = "client" | "translator";

export interface RoomTokenKeys {
  /** `iss` of the token: the LiveKit API key, or the embedded server's own key name. */
  readonly apiKey: string;
  readonly apiSecret: string;
}

export interface RoomGrant {
  readonly roomName: string;
  readonly identity: string;
  /** The language the participant speaks and hears (the `language` attribute LiveKit shows others). */
  readonly language?: string;
}

export async function mintRoomToken(
  keys: RoomTokenKeys,
  grant: RoomGrant & { readonly role: RoomRole; readonly ttlSec: number },
): Promise<string> {
  const token = new AccessToken(keys.apiKey, keys.apiSecret, {
    identity: grant.identity,
    ttl: grant.ttlSec,
    // The translator marks itself so clients (and the embedded server) can tell it from people.
    ...(grant.role === "translator"
      ? { attributes: { role: "translator" } }
      : grant.language
        ? { attributes: { language: grant.language } }
        : {}),
  });
  token.addGrant({
    roomJoin: true,
    room: grant.roomName,
    canPublish: true,
    canSubscribe: true,
    canPublishData: true,
    // The translator names each track's language in its own attributes (`track:<name>`).
    canUpdateOwnMetadata: true,
    ...(grant.role === "translator" ? { agent: true } : {}),
  });
  if (grant.role === "translator") token.kind = "agent";
  return token.toJwt();
}

/**
 * Verifies a token for `roomName`: the signature, expiry, and a join grant for exactly that room.
 * Returns the participant's identity, or a reason the token is refused.
 */
export async function verifyRoomToken(
  keys: RoomTokenKeys,
  token: string,
  roomName: string,
): Promise<{ ok: true; identity: string; language?: string } | { ok: false; reason: string }> {
  let claims: ClaimGrants;
  try {
    claims = await new TokenVerifier(keys.apiKey, keys.apiSecret).verify(token);
  } catch (error) {
    const message = (error as Error).message;
    return { ok: false, reason: /exp/iu.test(message) ? "token expired" : "invalid token" };
  }
  if (!claims.video?.roomJoin) return { ok: false, reason: "token does not grant joining a room" };
  if (claims.video.room !== roomName) return { ok: false, reason: "token is for another room" };
  if (!claims.sub) return { ok: false, reason: "token has no identity" };
  const language = claims.attributes?.["language"];
  return { ok: true, identity: claims.sub, ...(language ? { language } : {}) };
}
