import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import ipaddr from "ipaddr.js";

/**
 * The proxies the service believes (`TRUSTED_PROXIES`): their X-Forwarded-* headers (Fastify's
 * `trustProxy`, for the client address, protocol and host) and their `x-request-id`. Anyone else's
 * are ignored, since a client could otherwise choose the address and request id its lines are
 * logged under.
 */

/** Whether `address` (a peer's, IPv4-mapped IPv6 included) is one of the trusted proxies. */
export function trustedProxies(list: readonly string[]): (address: string) => boolean {
  const ranges = list.map((item): [ipaddr.IPv4 | ipaddr.IPv6, number] => {
    if (item.includes("/")) return ipaddr.parseCIDR(item);
    const single = ipaddr.process(item);
    return [single, single.kind() === "ipv6" ? 128 : 32];
  });
  return (address) => {
    if (ranges.length === 0 || !ipaddr.isValid(address)) return false;
    const parsed = ipaddr.process(address);
    return ranges.some(([range, bits]) => parsed.kind() === range.kind() && parsed.match(range, bits));
  };
}

/** An `x-request-id` the service adopts: letters, digits and `._:-`, at most 128 characters. */
const REQUEST_ID = /^[\w.:-]{1,128}$/u;

/**
 * Fastify's `genReqId`: the `x-request-id` of a trusted proxy (the socket's peer) when it is a plain
 * token, so one id follows a request from the load balancer through the fleet's logs; otherwise a
 * new UUID.
 */
export function requestIds(isTrusted: (address: string) => boolean): (request: IncomingMessage) => string {
  return (request) => {
    const given = request.headers["x-request-id"];
    const peer = request.socket.remoteAddress;
    const adopt =
      typeof given === "string" && REQUEST_ID.test(given) && peer !== undefined && isTrusted(peer);
    return adopt ? given : randomUUID();
  };
}
