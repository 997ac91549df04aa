import type { IncomingMessage } from "node:http";
import { Readable } from "node:stream";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { serializerCompiler, validatorCompiler } from "fastify-type-provider-zod";
import { z } from "zod";
import { errorBody, errorBodySchema } from "../wire/error-body.js";
import {
  IncompleteTransferError,
  MAX_OBJECT_BYTES,
  attachmentDisposition,
  objectKeyProblem,
} from "./common.js";
import { isLocalObjectStore, type LocalObjectStore, type SignedMethod, type StoredObject } from "./local.js";
import {
  ObjectExistsError,
  ObjectNotFoundError,
  ObjectTooLargeError,
  type ObjectStore,
  type UploadGate,
} from "./types.js";

/**
 * The embedded store's HTTP side: the routes its presigned URLs point at. Apart from the store
 * itself (src/storage/local.ts), which the service reads and writes without HTTP.
 */

export interface LocalStorageRouteOptions {
  /** Must be a store from createLocalObjectStore (typed loosely so a narrowed `kind` suffices). */
  readonly store: ObjectStore;
  /** Ceiling on any upload whatever its URL says; defaults to MAX_OBJECT_BYTES. */
  readonly maxBytes?: number;
  /** What the service knows of the upload a PUT is for. */
  readonly uploads?: UploadGate;
}

const UPLOAD_EXPIRED = "this upload was deleted by retention; ask for a new upload URL";
const ALREADY_UPLOADED =
  "this upload URL has already been used (an upload URL stores one file, once); ask for a new upload URL";

/** The refusals the routes send, for the API reference (and the serializer, which checks them). */
const refusals = (meanings: Record<number, string>) =>
  Object.fromEntries(
    Object.entries(meanings).map(([status, meaning]) => [status, errorBodySchema.describe(meaning)]),
  );
const REFUSED_URL = {
  400: "The object key is invalid (invalid_key), or the request is (invalid_request)",
  403: "The URL's signature does not allow this (invalid_signature) or has expired (expired)",
  500: "Internal error (internal_error)",
};

/** How long, and how much, a refused upload is still read and discarded so the client sees the 413. */
const LINGER_MS = 2000;
const LINGER_BYTES = 8 * 1024 * 1024;

/**
 * `PUT /storage/*` and `GET|HEAD /storage/*` for presigned URLs of the local store. Register it
 * without a prefix (the URLs are `${publicBaseUrl}/storage/<key>`). Its body handling is scoped to
 * this plugin: the request stream goes straight to a temp file, never through the app's parsers or
 * its global body limit.
 */
export async function localStorageRoutes(
  app: FastifyInstance,
  options: LocalStorageRouteOptions,
): Promise<void> {
  const given = options.store;
  if (!isLocalObjectStore(given))
    throw new TypeError("localStorageRoutes needs a store from createLocalObjectStore");
  const store: LocalObjectStore = given;
  const ceiling = Math.min(options.maxBytes ?? MAX_OBJECT_BYTES, MAX_OBJECT_BYTES);

  // Every content type (JSON included) reaches the handler as the raw stream; encapsulation keeps
  // this away from the rest of the app.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_request, payload, done) => done(null, payload));
  // The response schemas are zod's, whatever app the routes are registered in.
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  app.setErrorHandler((error, request, reply) => {
    const status = (error as { statusCode?: number }).statusCode ?? 500;
    if (status >= 500) {
      request.log.error({ err: error }, "storage request failed");
      return reply.code(500).send(errorBody("internal_error", "internal error; the failure was logged"));
    }
    // Fastify's own refusals, e.g. an unparseable Content-Type header (415).
    const code = status === 415 ? "content_type_mismatch" : status === 413 ? "too_large" : "invalid_request";
    return reply.code(status).send(errorBody(code, error instanceof Error ? error.message : String(error)));
  });

  const keyOf = (request: FastifyRequest) => (request.params as { "*"?: string })["*"] ?? "";

  function refuse(reply: FastifyReply, status: number, code: string, message: string) {
    return reply.code(status).send(errorBody(code, message));
  }

  function checkGrant(request: FastifyRequest, reply: FastifyReply, method: SignedMethod) {
    const key = keyOf(request);
    const problem = objectKeyProblem(key);
    if (problem !== undefined) {
      refuse(reply, 400, "invalid_key", `invalid object key: ${problem}`);
      return undefined;
    }
    const check = store.verify(method, key, request.query as Record<string, unknown>);
    if (!check.ok) {
      if (check.reason === "expired") {
        refuse(reply, 403, "expired", "this URL has expired; ask for a new one");
      } else {
        refuse(reply, 403, "invalid_signature", `this URL does not allow ${method} on this object`);
      }
      return undefined;
    }
    return check.grant;
  }

  app.route({
    method: "PUT",
    url: "/storage/*",
    schema: {
      tags: ["dubbing"],
      summary: "The embedded store: PUT an upload to its presigned URL (upload_url)",
      description:
        "Only with STORAGE_BACKEND=local. The URL's signature allows one object, size and type, stored " +
        "once: a PUT when the object exists is refused with 412 already_uploaded.",
      response: {
        200: z.object({ key: z.string(), bytes: z.number().int().describe("Bytes stored") }),
        ...refusals({
          ...REFUSED_URL,
          400: `${REFUSED_URL[400]}, or the body ended early (incomplete_upload)`,
          409: "The key clashes with another object's path (key_conflict)",
          410: "The upload was deleted by retention (upload_expired)",
          412: "The URL was used already (already_uploaded)",
          413: "The body is larger than the URL allows (too_large)",
          415: "The Content-Type is not the URL's (content_type_mismatch)",
        }),
      },
    },
    // The service-wide 1 MiB limit is for JSON; uploads are capped per URL while streaming.
    bodyLimit: ceiling + 1,
    handler: async (request, reply) => {
      const raw = request.raw;
      const body = request.body instanceof Readable ? request.body : raw;
      const grant = checkGrant(request, reply, "PUT");
      if (grant === undefined) return lingerAfter(reply, raw);
      const contentType = (request.headers["content-type"] ?? "").trim();
      if (contentType !== grant.contentType) {
        refuse(
          reply,
          415,
          "content_type_mismatch",
          `this URL requires Content-Type: ${grant.contentType} (got ${contentType || "none"})`,
        );
        return lingerAfter(reply, raw);
      }
      // Before reading the body: a client re-sending 500 MB should learn at once that it is refused.
      if (await store.exists(grant.key)) {
        refuse(reply, 412, "already_uploaded", ALREADY_UPLOADED);
        return lingerAfter(reply, raw);
      }
      if (options.uploads && !(await options.uploads.accepts(grant.key))) {
        refuse(reply, 410, "upload_expired", UPLOAD_EXPIRED);
        return lingerAfter(reply, raw);
      }
      const maxBytes = Math.min(grant.maxBytes, ceiling);
      const declared = request.headers["content-length"];
      if (declared !== undefined && Number(declared) > maxBytes) {
        refuse(reply, 413, "too_large", `the body may be at most ${maxBytes} bytes`);
        return lingerAfter(reply, raw);
      }
      try {
        const { bytes } = await store.receive(grant.key, body, maxBytes, grant.contentType);
        if (options.uploads && !(await options.uploads.stored(grant.key, bytes))) {
          return refuse(reply, 410, "upload_expired", UPLOAD_EXPIRED);
        }
        return reply.code(200).send({ key: grant.key, bytes });
      } catch (error) {
        if (error instanceof ObjectTooLargeError) {
          refuse(reply, 413, "too_large", `the body may be at most ${maxBytes} bytes`);
          return lingerAfter(reply, raw);
        }
        if (error instanceof ObjectExistsError) {
          refuse(reply, 412, "already_uploaded", ALREADY_UPLOADED);
          return lingerAfter(reply, raw);
        }
        if (error instanceof IncompleteTransferError) {
          // The client is gone; nothing to answer. Fastify skips sending on a destroyed socket.
          request.log.info({ key: grant.key }, "upload aborted by the client");
          return refuse(reply, 400, "incomplete_upload", "the upload ended before the whole body arrived");
        }
        if (isKeyConflict(error)) {
          refuse(reply, 409, "key_conflict", "the key clashes with another object's path");
          return lingerAfter(reply, raw);
        }
        request.log.error({ err: error, key: grant.key }, "storing an upload failed");
        refuse(reply, 500, "internal_error", "internal error; the failure was logged");
        return lingerAfter(reply, raw);
      }
    },
  });

  app.route({
    method: ["GET", "HEAD"],
    url: "/storage/*",
    schema: {
      tags: ["dubbing"],
      summary: "The embedded store: GET a result from its presigned URL (output_url, valid 48 hours)",
      response: {
        200: {
          description: "The object, with the Content-Type it was uploaded or stored with",
          content: { "*/*": { schema: z.string().describe("The object's bytes") } },
        },
        ...refusals({ ...REFUSED_URL, 404: "No such object (not_found)" }),
      },
    },
    handler: async (request, reply) => {
      const grant = checkGrant(request, reply, "GET");
      if (grant === undefined) return reply;
      let object: StoredObject;
      try {
        object = await store.openObject(grant.key);
      } catch (error) {
        if (error instanceof ObjectNotFoundError) return refuse(reply, 404, "not_found", "no such object");
        throw error;
      }
      reply
        .header("content-type", object.contentType)
        .header("content-length", String(object.bytes))
        .header("cache-control", "private, no-store")
        // Uploaded bytes are served from the API's origin: never sniff them, never run them as a page.
        .header("x-content-type-options", "nosniff")
        .header("content-security-policy", "default-src 'none'; sandbox");
      if (grant.downloadName !== undefined) {
        reply.header("content-disposition", attachmentDisposition(grant.downloadName));
      }
      if (request.method === "HEAD") {
        object.stream.destroy();
        return reply.send();
      }
      return reply.send(object.stream);
    },
  });
}

/**
 * After refusing an upload, keeps reading (and discarding) what the client is still sending for a
 * bounded time and amount: closing with unread data makes TCP reset the connection, which can make
 * the client lose the error response. Past the bounds the connection is dropped.
 */
function lingerAfter(reply: FastifyReply, raw: IncomingMessage): FastifyReply {
  if (raw.complete || raw.destroyed) return reply;
  let discarded = 0;
  const drop = () => raw.socket?.destroy();
  const timer = setTimeout(drop, LINGER_MS);
  timer.unref();
  const stop = () => clearTimeout(timer);
  raw.on("data", (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > LINGER_BYTES) drop();
  });
  raw.once("end", stop);
  raw.once("close", stop);
  raw.resume();
  return reply;
}

/** The key path collides with another key used as a directory ("a" vs "a/b"), or the reverse. */
function isKeyConflict(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === "ENOTDIR" || code === "EISDIR" || code === "EEXIST" || code === "ENOTEMPTY";
}
