import helmet from "@fastify/helmet";
import type { FastifyInstance } from "fastify";

/**
 * Security headers on every response (@fastify/helmet, its defaults unless said here). The pages
 * the service serves (the playground, where an API key is typed, and the reference at /docs) load
 * scripts, styles, fonts and images only from the service itself, run no inline script, embed no
 * plugin, and cannot be framed (`frame-ancestors 'none'`, and X-Frame-Options: DENY for older
 * browsers). They connect (fetch, WebSocket) and play media from the service and from
 * `browserOrigins`: where `ws_url`s point (PUBLIC_BASE_URL), where upload and result URLs point
 * (the S3 endpoint) and where the meeting page joins rooms on LiveKit (LIVEKIT_URL). Beyond
 * helmet's defaults: no Strict-Transport-Security and no
 * upgrade-insecure-requests, since TLS is the proxy's and a plain-HTTP install on a LAN must work;
 * Cross-Origin-Resource-Policy `cross-origin`, since results and the API are for clients anywhere.
 */
export async function registerSecurityHeaders(
  app: FastifyInstance,
  browserOrigins: readonly string[],
): Promise<void> {
  await app.register(helmet, {
    contentSecurityPolicy: {
      useDefaults: true,
      directives: {
        "connect-src": ["'self'", ...browserOrigins],
        "media-src": ["'self'", "blob:", ...browserOrigins],
        "style-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "upgrade-insecure-requests": null,
      },
    },
    frameguard: { action: "deny" },
    strictTransportSecurity: false,
    crossOriginResourcePolicy: { policy: "cross-origin" },
  });
}

/**
 * The origins besides the service's own that its pages reach: PUBLIC_BASE_URL (over http(s) and
 * ws(s)), the object store's public endpoint (any S3 host on AWS, whose URLs name the bucket) and,
 * with rooms on LiveKit, the LiveKit server the meeting page joins (LIVEKIT_URL, over ws(s) and
 * http(s): livekit-client also asks it over HTTP why a connection failed).
 */
export function browserOriginsOf(
  publicBaseUrl: string | undefined,
  store:
    | { readonly kind: "local" }
    | {
        readonly kind: "s3";
        readonly publicEndpoint?: string | undefined;
        readonly endpoint?: string | undefined;
      },
  livekitUrl?: string,
): string[] {
  const origins: string[] = [];
  if (publicBaseUrl) {
    const { origin } = new URL(publicBaseUrl);
    origins.push(origin, origin.replace(/^http/u, "ws"));
  }
  if (store.kind === "s3") {
    const endpoint = store.publicEndpoint ?? store.endpoint;
    origins.push(endpoint ? new URL(endpoint).origin : "https://*.amazonaws.com");
  }
  if (livekitUrl) {
    const { origin } = new URL(livekitUrl.replace(/^ws/u, "http"));
    origins.push(origin, origin.replace(/^http/u, "ws"));
  }
  return [...new Set(origins)];
}
