import { WebSocket, type RawData } from "ws";
import { SocketWire, toBuffer } from "../wire/socket-wire.js";

/** Frames a client may send before the connection to the host is open; more close the client (1008). */
const MAX_EARLY_FRAMES = 256;
/** Largest frame taken from the host (another process of the fleet, not a client). */
const MAX_HOST_FRAME_BYTES = 16 << 20;

/**
 * Joins a client's WebSocket to the same endpoint on the process that hosts it (`target`, a ws://
 * URL carrying the client's own credentials, which the host checks again). Frames pass both ways
 * unchanged; towards the client the usual slow-reader policy applies. Either side closing closes
 * the other with its code.
 */
export function forwardSocket(client: WebSocket, target: string): void {
  const wire = new SocketWire(client);
  const host = new WebSocket(target, { maxPayload: MAX_HOST_FRAME_BYTES, perMessageDeflate: false });
  const early: { data: Buffer; isBinary: boolean }[] = [];

  client.on("message", (data: RawData, isBinary: boolean) => {
    const bytes = toBuffer(data);
    if (host.readyState === WebSocket.OPEN) host.send(bytes, { binary: isBinary });
    else if (early.length < MAX_EARLY_FRAMES) early.push({ data: bytes, isBinary });
    else wire.close(1008, "too many frames before the room was reached");
  });
  host.on("open", () => {
    for (const { data, isBinary } of early.splice(0)) host.send(data, { binary: isBinary });
  });
  host.on("message", (data: RawData, isBinary: boolean) => wire.forwarded(toBuffer(data), isBinary));
  host.on("close", (code: number, reason: Buffer) => wire.close(sendable(code), reason.toString()));
  host.on("error", () => wire.close(1011, "the process hosting this room cannot be reached; retry"));
  host.on("unexpected-response", (_request, response) => {
    host.terminate();
    wire.close(1011, `the process hosting this room refused the connection (${response.statusCode})`);
  });
  const hangUp = (code?: number) => {
    if (host.readyState === WebSocket.OPEN) host.close(code === undefined ? 1000 : sendable(code));
    else host.terminate();
  };
  client.on("close", (code: number) => hangUp(code));
  client.on("error", () => hangUp());
}

/** Close codes that may be sent in a close frame (1005, 1006 and 1015 only describe what happened). */
function sendable(code: number): number {
  return code === 1005 ? 1000 : code === 1006 || code === 1015 ? 1011 : code;
}
