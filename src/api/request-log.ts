import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from "fastify";

/**
 * What the service writes about each HTTP request, bounded so that nobody can fill the disk with
 * it: one line per request (when it completes, with its status), the URL and the header values in
 * it cut to a fixed length, and the lines of refused (4xx) and unauthenticated requests, which
 * anyone can send, written at most `perSecond` times a second; the others are counted and the count
 * written once that second is over. Server errors and authenticated requests that succeed are
 * always written (the per-account rate limits bound those).
 */

/** Longest URL (path and query) a log line carries; the length of a longer one is noted instead. */
export const MAX_LOGGED_URL_CHARS = 200;
const MAX_LOGGED_HEADER_CHARS = 100;

function cut(value: string | undefined, max: number): string | undefined {
  if (value === undefined || value.length <= max) return value;
  return `${value.slice(0, max)}…(${value.length} characters)`;
}

/** pino serializers for the request in log lines (Fastify's fields, each bounded). */
export const requestLogSerializers = {
  req(request: FastifyRequest) {
    const version = request.headers["accept-version"];
    return {
      method: cut(request.method, MAX_LOGGED_HEADER_CHARS),
      url: cut(request.url, MAX_LOGGED_URL_CHARS),
      version: cut(typeof version === "string" ? version : undefined, MAX_LOGGED_HEADER_CHARS),
      host: cut(request.host, MAX_LOGGED_HEADER_CHARS),
      remoteAddress: request.ip,
      remotePort: request.socket?.remotePort,
    };
  },
};

export class RequestLog extends LogController {
  private window = -1;
  private written = 0;
  private suppressed = 0;
  private flush: NodeJS.Timeout | undefined;

  constructor(private readonly perSecond: number) {
    super({ requestIdLogLabel: "request_id" });
  }

  /** Nothing when a request arrives: its one line is written when it completes, with the status. */
  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    const responseTime = reply.elapsedTime;
    if (error) {
      reply.log.error({ req: request, res: reply, err: error, responseTime }, "request errored");
      return;
    }
    const status = reply.statusCode;
    const open = (status >= 400 && status < 500) || (status < 400 && request.account === undefined);
    if (open && !this.admit(request.server.log)) return;
    reply.log.info({ req: request, res: reply, responseTime }, "request completed");
  }

  /** Whether one more line fits this second; when not, it is counted for the summary line. */
  private admit(log: FastifyBaseLogger): boolean {
    const now = Date.now();
    const second = Math.floor(now / 1000);
    if (second !== this.window) {
      this.window = second;
      this.written = 0;
    }
    if (this.written < this.perSecond) {
      this.written++;
      return true;
    }
    this.suppressed++;
    this.flush ??= setTimeout(
      () => {
        this.flush = undefined;
        log.warn(
          { suppressed: this.suppressed },
          `${this.suppressed} refused or unauthenticated requests were not logged (more than ${this.perSecond} a second)`,
        );
        this.suppressed = 0;
      },
      1000 - (now % 1000),
    ).unref();
    return false;
  }
}
