import { SignJWT } from "jose";
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
  /** The participant's display name (LiveKit's `name` claim, which it shows others as `name`). */
  readonly name?: string;
}

export async function mintRoomToken(
  keys: RoomTokenKeys,
  grant: RoomGrant & { readonly role: RoomRole; readonly ttlSec: number },
): Promise<string> {
  if (grant.role === "client") return mintClientToken(keys, grant);
  const token = new AccessToken(keys.apiKey, keys.apiSecret, {
    identity: grant.identity,
    ttl: grant.ttlSec,
    // The translator marks itself so clients (and the embedded server) can tell it from people.
    attributes: { role: "translator" },
  });
  token.addGrant({
    roomJoin: true,
    room: grant.roomName,
    canPublish: true,
    canSubscribe: true,
    canPublishData: true,
    canUpdateOwnMetadata: true,
    agent: true,
  });
  token.kind = "agent";
  return token.toJwt();
}

/**
 * A client may publish its microphone and subscribe, nothing more: with data or its own metadata
 * it could pass for the translator (forged captions on everyone's page) or change the language its
 * token gave it. Only the translator sends data and names its tracks' languages (attributes).
 *
 * Pinch's Python SDK publishes its microphone without naming a source (TrackSource UNKNOWN), so
 * "unknown" is allowed beside "microphone"; camera and screen share are not. livekit-server-sdk's
 * `AccessToken.toJwt` cannot write "unknown" (it throws "Cannot convert TrackSource 0 to string"),
 * though LiveKit's server reads it (`strings.ToLower(TrackSource.String())`, livekit/protocol's
 * auth/grants.go): this signs the claims `toJwt` would, the same way (HS256, iss, sub, nbf, exp).
 */
function mintClientToken(
  keys: RoomTokenKeys,
  grant: RoomGrant & { readonly ttlSec: number },
): Promise<string> {
  const video = {
    roomJoin: true,
    room: grant.roomName,
    canPublish: true,
    canPublishSources: ["microphone", "unknown"],
    canSubscribe: true,
    canPublishData: false,
    canUpdateOwnMetadata: false,
  };
  return new SignJWT({
    video,
    ...(grant.language ? { attributes: { language: grant.language } } : {}),
    ...(grant.name ? { name: grant.name } : {}),
  })
    .setProtectedHeader({ alg: "HS256" })
    .setIssuer(keys.apiKey)
    .setSubject(grant.identity)
    .setNotBefore(new Date())
    .setExpirationTime(`${grant.ttlSec}s`)
    .sign(new TextEncoder().encode(keys.apiSecret));
}

/**
 * Verifies a token for `roomName`: the signature, expiry, and a join grant for exactly that room.
 * Returns the participant's identity, or a reason the token is refused.
 */
export async function verifyRoomToken(
  keys: RoomTokenKeys,
  token: string,
  roomName: string,
): Promise<{ ok: true; identity: string; language?: string; name?: string } | { ok: false; reason: string }> {
  let claims: ClaimGrants;
  try {
    // No clock tolerance (the SDK allows 10 s by default): this process signs and checks the
    // token with one clock, so a token is refused the second it expires. (LiveKit's own server
    // accepts a token up to 60 s past its expiry: docs/livekit.md.)
    claims = await new TokenVerifier(keys.apiKey, keys.apiSecret).verify(token, 0);
  } catch (error) {
    const message = (error as Error).message;
    return { ok: false, reason: /exp/iu.test(message) ? "token expired" : "invalid token" };
  }
  if (!claims.video?.roomJoin) return { ok: false, reason: "token does not grant joining a room" };
  if (claims.video.room !== roomName) return { ok: false, reason: "token is for another room" };
  if (!claims.sub) return { ok: false, reason: "token has no identity" };
  const language = claims.attributes?.["language"];
  const name = claims.name;
  return { ok: true, identity: claims.sub, ...(language ? { language } : {}), ...(name ? { name } : {}) };
}
