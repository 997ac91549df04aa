import { createHmac, timingSafeEqual } from "node:crypto";
import { constants as fsConstants } from "node:fs";
import { copyFile, link, mkdir, open, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { basename, dirname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { errorBody } from "../wire/error-body.js";
import {
  IncompleteTransferError,
  MAX_OBJECT_BYTES,
  assertPresignOptions,
  assertValidObjectKey,
  attachmentDisposition,
  objectKeyProblem,
  streamToNewFile,
  tempPathFor,
} from "./common.js";
import {
  ObjectExistsError,
  ObjectNotFoundError,
  ObjectTooLargeError,
  type ObjectStore,
  type PresignedDownload,
  type PresignedUpload,
} from "./types.js";

export interface LocalObjectStoreOptions {
  /** Directory holding the objects (created if missing). */
  readonly dir: string;
  /** Origin (plus optional path prefix) under which the app serves `localStorageRoutes`. */
  readonly publicBaseUrl: string;
  /** HMAC key for presigned URLs; anyone holding it can mint URLs. */
  readonly secret: string;
  /** Clock in milliseconds (tests move it to expire URLs). */
  readonly now?: () => number;
}

export type SignedMethod = "PUT" | "GET";

/** What a verified presigned URL allows. */
export interface SignedGrant {
  readonly method: SignedMethod;
  readonly key: string;
  readonly expires: number;
  /** PUT only: the largest body accepted. */
  readonly maxBytes: number;
  /** PUT only: the Content-Type the client must send. */
  readonly contentType: string;
  /** GET only: the filename for Content-Disposition, when one was signed. */
  readonly downloadName: string | undefined;
}

export type GrantCheck =
  | { readonly ok: true; readonly grant: SignedGrant }
  | { readonly ok: false; readonly reason: "invalid_signature" | "expired" };

export interface StoredObject {
  readonly stream: Readable;
  readonly bytes: number;
  readonly contentType: string;
}

/** The embedded store plus what its HTTP routes need. */
export interface LocalObjectStore extends ObjectStore {
  readonly kind: "local";
  readonly dir: string;
  /** Checks a presigned URL's query (signature first, then expiry) for `method` on `key`. */
  verify(method: SignedMethod, key: string, query: Readonly<Record<string, unknown>>): GrantCheck;
  /**
   * Streams a request body into a new object `key`; it appears only once the whole body is on disk.
   * Throws ObjectExistsError when the object exists (then or by the time the body has arrived).
   */
  receive(key: string, body: Readable, maxBytes: number, contentType: string): Promise<{ bytes: number }>;
  /** Opens the object for reading; throws ObjectNotFoundError. */
  openObject(key: string): Promise<StoredObject>;
}

interface Metadata {
  readonly contentType: string;
}

const SIGNATURE_VERSION = "relay-storage-v1";
const DEFAULT_CONTENT_TYPE = "application/octet-stream";

/**
 * Objects are plain files at `<dir>/<key>`; each has a sidecar `<dir>/<key dir>/.<name>.meta.json`
 * with its content type. Keys never have dot-named segments, so sidecars and temp files (also
 * dot-named, in the object's own directory so renames are atomic) never collide with objects.
 */
export function createLocalObjectStore(options: LocalObjectStoreOptions): LocalObjectStore {
  if (options.secret.length < 16)
    throw new RangeError("the local object store secret needs at least 16 characters");
  const root = resolve(options.dir);
  const baseUrl = options.publicBaseUrl.replace(/\/+$/u, "");
  const now = options.now ?? Date.now;
  const secret = options.secret;

  const objectPath = (key: string) => {
    assertValidObjectKey(key);
    return join(root, key);
  };
  const metaPath = (path: string) => join(dirname(path), `.${basename(path)}.meta.json`);

  const sign = (fields: Omit<SignedGrant, "downloadName"> & { downloadName?: string | undefined }) =>
    createHmac("sha256", secret)
      // JSON keeps the fields unambiguous whatever characters they contain.
      .update(
        JSON.stringify([
          SIGNATURE_VERSION,
          fields.method,
          fields.key,
          String(fields.expires),
          fields.method === "PUT" ? String(fields.maxBytes) : "",
          fields.contentType,
          fields.downloadName ?? "",
        ]),
      )
      .digest();

  const expiryFor = (expiresInSec: number) => Math.floor(now() / 1000) + expiresInSec;

  async function readContentType(path: string): Promise<string> {
    try {
      const meta = JSON.parse(await readFile(metaPath(path), "utf8")) as Partial<Metadata>;
      return typeof meta.contentType === "string" ? meta.contentType : DEFAULT_CONTENT_TYPE;
    } catch {
      return DEFAULT_CONTENT_TYPE;
    }
  }

  /**
   * Makes a finished temp file the object. The sidecar goes first and the data rename is the commit
   * point: a failure before it leaves any previous object in place, never a half-written one.
   */
  async function commit(tmp: string, path: string, contentType: string): Promise<void> {
    const meta = metaPath(path);
    const metaTmp = `${tmp}.meta`;
    try {
      await writeFile(metaTmp, JSON.stringify({ contentType } satisfies Metadata), {
        flag: "wx",
        mode: 0o600,
      });
      await rename(metaTmp, meta);
      await rename(tmp, path);
    } catch (error) {
      await rm(metaTmp, { force: true });
      await rm(tmp, { force: true });
      throw error;
    }
  }

  /**
   * Makes a finished temp file the object only if there is none: the hard link is the atomic
   * create-if-absent (two PUTs racing store one object). The sidecar follows; a reader in between
   * sees the default content type.
   */
  async function commitNew(tmp: string, path: string, key: string, contentType: string): Promise<void> {
    try {
      await link(tmp, path);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (code === "EEXIST" && (await stat(path).catch(() => undefined))?.isFile()) {
        throw new ObjectExistsError(key);
      }
      throw error;
    } finally {
      await rm(tmp, { force: true });
    }
    const metaTmp = `${tmp}.meta`;
    try {
      await writeFile(metaTmp, JSON.stringify({ contentType } satisfies Metadata), {
        flag: "wx",
        mode: 0o600,
      });
      await rename(metaTmp, metaPath(path));
    } catch (error) {
      await rm(metaTmp, { force: true });
      throw error;
    }
  }

  const store: LocalObjectStore = {
    kind: "local",
    dir: root,

    async presignUpload(key, { contentType, maxBytes, expiresInSec }): Promise<PresignedUpload> {
      assertValidObjectKey(key);
      assertPresignOptions({ contentType, maxBytes, expiresInSec });
      const expires = expiryFor(expiresInSec);
      const sig = sign({ method: "PUT", key, expires, maxBytes, contentType });
      const query = new URLSearchParams({
        method: "PUT",
        expires: String(expires),
        max: String(maxBytes),
        ct: contentType,
        sig: sig.toString("hex"),
      });
      return {
        url: `${baseUrl}/storage/${key}?${query}`,
        expiresAt: new Date(expires * 1000),
        headers: { "Content-Type": contentType },
      };
    },

    async presignDownload(key, { expiresInSec, downloadName }): Promise<PresignedDownload> {
      assertValidObjectKey(key);
      assertPresignOptions({ expiresInSec, downloadName });
      const expires = expiryFor(expiresInSec);
      const sig = sign({ method: "GET", key, expires, maxBytes: 0, contentType: "", downloadName });
      const query = new URLSearchParams({ method: "GET", expires: String(expires) });
      if (downloadName !== undefined) query.set("name", downloadName);
      query.set("sig", sig.toString("hex"));
      return { url: `${baseUrl}/storage/${key}?${query}`, expiresAt: new Date(expires * 1000) };
    },

    verify(method, key, query): GrantCheck {
      const field = (name: string): string | undefined => {
        const value = query[name];
        return typeof value === "string" ? value : undefined;
      };
      const given = field("sig");
      const expiresText = field("expires");
      const maxText = field("max") ?? "";
      if (
        field("method") !== method ||
        given === undefined ||
        !/^[0-9a-f]{64}$/u.test(given) ||
        expiresText === undefined ||
        !/^[0-9]{1,12}$/u.test(expiresText) ||
        (method === "PUT" && !/^[0-9]{1,12}$/u.test(maxText)) ||
        (method === "GET" && maxText !== "") ||
        objectKeyProblem(key) !== undefined
      ) {
        return { ok: false, reason: "invalid_signature" };
      }
      const grant: SignedGrant = {
        method,
        key,
        expires: Number(expiresText),
        maxBytes: method === "PUT" ? Number(maxText) : 0,
        contentType: field("ct") ?? "",
        downloadName: field("name"),
      };
      if (!timingSafeEqual(Buffer.from(given, "hex"), sign(grant)))
        return { ok: false, reason: "invalid_signature" };
      if (now() > grant.expires * 1000) return { ok: false, reason: "expired" };
      return { ok: true, grant };
    },

    async receive(key, body, maxBytes, contentType) {
      const path = objectPath(key);
      await mkdir(dirname(path), { recursive: true });
      const tmp = tempPathFor(path);
      const bytes = await streamToNewFile(body, tmp, maxBytes);
      await commitNew(tmp, path, key, contentType);
      return { bytes };
    },

    async openObject(key) {
      const path = objectPath(key);
      let handle;
      try {
        handle = await open(path, "r");
      } catch (error) {
        if (isMissing(error)) throw new ObjectNotFoundError(key);
        throw error;
      }
      try {
        const info = await handle.stat();
        if (!info.isFile()) throw new ObjectNotFoundError(key);
        const contentType = await readContentType(path);
        return { stream: handle.createReadStream(), bytes: info.size, contentType };
      } catch (error) {
        await handle.close();
        throw error;
      }
    },

    async putFile(key, sourcePath, contentType) {
      const path = objectPath(key);
      await mkdir(dirname(path), { recursive: true });
      const tmp = tempPathFor(path);
      try {
        // Reflink where the filesystem can, a plain copy otherwise.
        await copyFile(sourcePath, tmp, fsConstants.COPYFILE_EXCL | fsConstants.COPYFILE_FICLONE);
      } catch (error) {
        await rm(tmp, { force: true });
        throw error;
      }
      await commit(tmp, path, contentType);
    },

    async getToFile(key, destination, maxBytes) {
      const object = await store.openObject(key);
      if (object.bytes > maxBytes) {
        object.stream.destroy();
        throw new ObjectTooLargeError(maxBytes);
      }
      const tmp = tempPathFor(resolve(destination));
      try {
        const bytes = await streamToNewFile(object.stream, tmp, maxBytes);
        await rename(tmp, destination);
        return { bytes };
      } catch (error) {
        await rm(tmp, { force: true });
        throw error;
      } finally {
        object.stream.destroy();
      }
    },

    async exists(key) {
      try {
        return (await stat(objectPath(key))).isFile();
      } catch (error) {
        if (isMissing(error)) return false;
        throw error;
      }
    },

    async delete(key) {
      const path = objectPath(key);
      // Data first: once it is gone the object is gone, whatever happens to the sidecar.
      // Empty directories stay: pruning them would race with uploads creating files in them.
      try {
        if ((await stat(path)).isFile()) await rm(path, { force: true });
      } catch (error) {
        if (!isMissing(error)) throw error;
      }
      await rm(metaPath(path), { force: true });
    },

    async close() {},
  };
  return store;
}

function isMissing(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === "ENOENT" || code === "ENOTDIR" || code === "EISDIR";
}

/** The key path collides with another key used as a directory ("a" vs "a/b"), or the reverse. */
function isKeyConflict(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === "ENOTDIR" || code === "EISDIR" || code === "EEXIST" || code === "ENOTEMPTY";
}

export interface LocalStorageRouteOptions {
  /** Must be a store from createLocalObjectStore (typed loosely so a narrowed `kind` suffices). */
  readonly store: ObjectStore;
  /** Ceiling on any upload whatever its URL says; defaults to MAX_OBJECT_BYTES. */
  readonly maxBytes?: number;
  /** What the service knows of the upload a PUT is for. */
  readonly uploads?: UploadGate;
}

/** The service's view of uploads, consulted by PUTs (keys are the uploads' object keys). */
export interface UploadGate {
  /** Whether an object may still be stored at `key` (false once retention deleted its upload). */
  accepts(key: string): Promise<boolean>;
  /** The object is stored (`bytes` long); false when the upload was deleted meanwhile (and the object with it). */
  stored(key: string, bytes: number): Promise<boolean>;
}

export function isLocalObjectStore(store: ObjectStore): store is LocalObjectStore {
  const candidate = store as Partial<LocalObjectStore>;
  return (
    store.kind === "local" &&
    typeof candidate.verify === "function" &&
    typeof candidate.receive === "function"
  );
}

const UPLOAD_EXPIRED = "this upload was deleted by retention; ask for a new upload URL";
const ALREADY_UPLOADED =
  "this upload URL has already been used (an upload URL stores one file, once); ask for a new upload URL";

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
