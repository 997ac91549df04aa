/**
 * Object storage behind one interface: the embedded store under DATA_DIR (presigned URLs signed by
 * the service itself) or any S3-compatible service. Keys are "/"-separated, e.g. "uploads/<id>".
 */

export interface PresignedUpload {
  readonly url: string;
  readonly expiresAt: Date;
  /** Headers the client must send with the PUT (at least Content-Type). */
  readonly headers: Readonly<Record<string, string>>;
}

export interface PresignedDownload {
  readonly url: string;
  readonly expiresAt: Date;
}

export class ObjectTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`object is larger than ${maxBytes} bytes`);
  }
}

export class ObjectNotFoundError extends Error {
  constructor(readonly key: string) {
    super(`no object "${key}"`);
  }
}

/** A presigned upload URL was used again: an upload URL stores one object, once. */
export class ObjectExistsError extends Error {
  constructor(readonly key: string) {
    super(`object "${key}" already exists`);
  }
}

/** Objects under `prefix` are deleted `days` after they were written (an S3 lifecycle rule). */
export interface ExpiryRule {
  readonly id: string;
  readonly prefix: string;
  readonly days: number;
}

export interface ObjectStore {
  readonly kind: "local" | "s3";
  /**
   * A URL the client PUTs the object to, valid for `expiresInSec`, bound to `contentType`. It
   * creates the object once: a PUT when the object exists is refused (the embedded store always;
   * S3 with conditional uploads, through the `If-None-Match: *` header it then requires).
   */
  presignUpload(
    key: string,
    options: { contentType: string; maxBytes: number; expiresInSec: number; baseUrl?: string },
  ): Promise<PresignedUpload>;
  /**
   * A URL anyone holding it can GET the object from until it expires. `baseUrl` (both): where the
   * client reached the service, for the embedded store's URLs (S3's are S3's own).
   */
  presignDownload(
    key: string,
    options: { expiresInSec: number; downloadName?: string; baseUrl?: string },
  ): Promise<PresignedDownload>;
  /** Stores a local file under `key` (replacing any previous object atomically). */
  putFile(key: string, path: string, contentType: string): Promise<void>;
  /** Copies the object to a local file; throws ObjectTooLargeError past `maxBytes`, ObjectNotFoundError when absent. */
  getToFile(key: string, path: string, maxBytes: number): Promise<{ bytes: number }>;
  exists(key: string): Promise<boolean>;
  /** Idempotent: deleting a missing object succeeds. */
  delete(key: string): Promise<void>;
  /**
   * S3 only: merges `rules` (replacing rules of the same id, keeping the operator's others) into
   * the bucket's lifecycle configuration.
   */
  ensureExpiryRules?(rules: readonly ExpiryRule[]): Promise<void>;
  /**
   * The embedded store only: the file holding the object (objects are plain files there), so a
   * reader can open it where it lies instead of copying it.
   */
  filePath?(key: string): string;
  close(): Promise<void>;
}

/**
 * The service's view of uploads, consulted by the embedded store's PUTs (keys are the uploads'
 * object keys; src/dubbing/jobs/retention.ts answers).
 */
export interface UploadGate {
  /** Whether an object may still be stored at `key` (false once retention deleted its upload). */
  accepts(key: string): Promise<boolean>;
  /** The object is stored (`bytes` long); false when the upload was deleted meanwhile (and the object with it). */
  stored(key: string, bytes: number): Promise<boolean>;
}
