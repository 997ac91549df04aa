import type { Redis } from "ioredis";
import type { RoomEndReason } from "../rooms/types.js";

/** Where a room is hosted: the process running its translator, and the account that created it. */
export interface RoomLocation {
  readonly workerId: string;
  readonly accountId: string;
  /** An ended room's entry: why it ended (src/rooms/rooms.ts's RoomEndReason). */
  readonly endedReason?: RoomEndReason;
}

/**
 * The fleet's rooms, in its Redis under `<prefix>room:<name>`: a process that does not host a room
 * finds its host here to forward a participant's connection, or to grant access to the account
 * that created it. Entries expire with the room's maximum lifetime, so a host killed before it
 * could remove them leaves nothing behind for long (and a dead host is not forwarded to).
 */
export class RoomDirectory {
  constructor(
    private readonly redis: Redis,
    private readonly keyPrefix: string,
  ) {}

  async register(roomName: string, location: RoomLocation, lifetimeMs: number): Promise<void> {
    await this.redis.set(this.key(roomName), JSON.stringify(location), "PX", lifetimeMs);
  }

  async lookup(roomName: string): Promise<RoomLocation | undefined> {
    const value = await this.redis.get(this.key(roomName));
    return value ? (JSON.parse(value) as RoomLocation) : undefined;
  }

  async remove(roomName: string): Promise<void> {
    await this.redis.del(this.key(roomName));
  }

  private key(roomName: string): string {
    return `${this.keyPrefix}room:${roomName}`;
  }
}
