import { createSession, RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { API_KEY } from "./env.js";

/**
 * A real-time session on the service at `baseUrl`, its socket open and its `ready` frame in: the
 * one way the integration tests open a session (`ready` as `isReady` recognizes it).
 */
export async function openSession(
  baseUrl: string,
  params: Record<string, string> = {},
  options: { readonly key?: string; readonly isReady?: (message: ServerMessage) => boolean } = {},
): Promise<RealtimeSocket> {
  const session = await createSession(baseUrl, options.key ?? API_KEY, params);
  const socket = await RealtimeSocket.connect(session.ws_url);
  await socket.waitFor(options.isReady ?? ((m) => m.type === "ready"));
  return socket;
}
