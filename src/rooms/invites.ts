import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Share links for meetings: an invitation is a short signed code naming a room, one participant
 * (their identity) and the language they speak, valid for as long as the room is open. Opening it
 * asks the service for a fresh room token (ROOM_TOKEN_TTL_SEC), so a participant who drops out
 * rejoins whenever they like, as the same person. The code is written by hand rather than as a
 * JWT because it goes in a link people paste into chats: 40–50 characters instead of 600. It holds
 * nothing secret (room names and identities are random, not confidential); the HMAC makes it
 * unforgeable, and the room's end makes it useless.
 */
export interface Invitation {
  readonly roomName: string;
  readonly identity: string;
  /** The language the participant speaks and hears; undefined: none declared (a spec room). */
  readonly language: string | undefined;
  /** The creator's own invitation: their page keeps an empty meeting open while it is open. */
  readonly host: boolean;
}

const VERSION = 1;
const HOST_FLAG = 1;
/** Room names are `api-` and 10 random bytes in hex (src/rooms/rooms.ts); identities `client-` and 6. */
const ROOM_BYTES = 10;
const IDENTITY_BYTES = 6;
/** 96 bits of HMAC-SHA256: beyond guessing, and short. */
const MAC_BYTES = 12;
/** A BCP-47 tag as rooms name languages (`pt-BR`, `zh-Hant`): far below this. */
const MAX_LANGUAGE_BYTES = 35;
const ROOM_NAME = /^api-([0-9a-f]{20})$/u;
const IDENTITY = /^client-([0-9a-f]{12})$/u;
/** base64url of the longest invitation, with room to spare: longer input is refused unread. */
export const MAX_INVITATION_LENGTH = 128;

export class Invitations {
  private readonly key: Buffer;

  constructor(secret: string) {
    // A key of its own, so an invitation can never be taken for any other signed value.
    this.key = createHmac("sha256", secret).update("relay invitations").digest();
  }

  /** The code of an invitation, for a room and identity this service named. */
  encode(invitation: Invitation): string {
    const room = ROOM_NAME.exec(invitation.roomName)?.[1];
    const identity = IDENTITY.exec(invitation.identity)?.[1];
    if (!room || !identity)
      throw new Error(`not a room and identity of this service: ${invitation.roomName}`);
    const language = Buffer.from(invitation.language ?? "", "utf8");
    if (language.length > MAX_LANGUAGE_BYTES) throw new Error("language tag too long for an invitation");
    const body = Buffer.concat([
      Buffer.from([VERSION, invitation.host ? HOST_FLAG : 0]),
      Buffer.from(room, "hex"),
      Buffer.from(identity, "hex"),
      language,
    ]);
    return Buffer.concat([body, this.mac(body)]).toString("base64url");
  }

  /** The invitation a code holds, or undefined when it is not one this service signed. */
  decode(code: string): Invitation | undefined {
    if (code.length > MAX_INVITATION_LENGTH || !/^[A-Za-z0-9_-]+$/u.test(code)) return undefined;
    const bytes = Buffer.from(code, "base64url");
    const header = 2 + ROOM_BYTES + IDENTITY_BYTES;
    if (bytes.length < header + MAC_BYTES) return undefined;
    const body = bytes.subarray(0, bytes.length - MAC_BYTES);
    if (!timingSafeEqual(bytes.subarray(body.length), this.mac(body)) || body[0] !== VERSION)
      return undefined;
    const language = body.subarray(header).toString("utf8");
    return {
      roomName: `api-${body.subarray(2, 2 + ROOM_BYTES).toString("hex")}`,
      identity: `client-${body.subarray(2 + ROOM_BYTES, header).toString("hex")}`,
      language: language === "" ? undefined : language,
      host: (body[1]! & HOST_FLAG) !== 0,
    };
  }

  private mac(body: Buffer): Buffer {
    return createHmac("sha256", this.key).update(body).digest().subarray(0, MAC_BYTES);
  }
}
