import { createHmac, timingSafeEqual } from "node:crypto";
import { constants as fsConstants } from "node:fs";
import { copyFile, link, mkdir, open, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import type { Readable } from "node:stream";
import {
  assertPresignOptions,
  assertValidObjectKey,
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
  /** Origin (plus optional path prefix) under which the app serves `localStorageRoutes` (local-routes.ts). */
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

/** The embedded store plus what its HTTP routes (src/storage/local-routes.ts) need. */
export interface LocalObjectStore extends ObjectStore {
  readonly kind: "local";
  readonly dir: string;
  filePath(key: string): string;
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
  const now = options.now ?? (() => Date.now());
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
    filePath: objectPath,

    async presignUpload(
      key,
      { contentType, maxBytes, expiresInSec, baseUrl: asked },
    ): Promise<PresignedUpload> {
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
        url: `${asked?.replace(/\/+$/u, "") ?? baseUrl}/storage/${key}?${query}`,
        expiresAt: new Date(expires * 1000),
        headers: { "Content-Type": contentType },
      };
    },

    async presignDownload(key, { expiresInSec, downloadName, baseUrl: asked }): Promise<PresignedDownload> {
      assertValidObjectKey(key);
      assertPresignOptions({ expiresInSec, downloadName });
      const expires = expiryFor(expiresInSec);
      const sig = sign({ method: "GET", key, expires, maxBytes: 0, contentType: "", downloadName });
      const query = new URLSearchParams({ method: "GET", expires: String(expires) });
      if (downloadName !== undefined) query.set("name", downloadName);
      query.set("sig", sig.toString("hex"));
      return {
        url: `${asked?.replace(/\/+$/u, "") ?? baseUrl}/storage/${key}?${query}`,
        expiresAt: new Date(expires * 1000),
      };
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

export function isLocalObjectStore(store: ObjectStore): store is LocalObjectStore {
  const candidate = store as Partial<LocalObjectStore>;
  return (
    store.kind === "local" &&
    typeof candidate.verify === "function" &&
    typeof candidate.receive === "function"
  );
}
