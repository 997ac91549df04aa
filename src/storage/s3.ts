import { createReadStream } from "node:fs";
import { rename, rm, stat } from "node:fs/promises";
import { resolve } from "node:path";
import { Readable } from "node:stream";
import {
  DeleteObjectCommand,
  GetBucketLifecycleConfigurationCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketLifecycleConfigurationCommand,
  PutObjectCommand,
  type LifecycleRule,
  S3Client,
  S3ServiceException,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import {
  assertPresignOptions,
  assertValidObjectKey,
  attachmentDisposition,
  streamToNewFile,
  tempPathFor,
} from "./common.js";
import { ObjectNotFoundError, ObjectTooLargeError, type ExpiryRule, type ObjectStore } from "./types.js";

export interface S3ObjectStoreOptions {
  readonly bucket: string;
  readonly region: string;
  /** For S3-compatible services (MinIO, R2, Ceph...); AWS S3 when absent. */
  readonly endpoint?: string;
  /** Both or neither; without them the SDK's default credential chain applies. */
  readonly accessKeyId?: string;
  readonly secretAccessKey?: string;
  /** `<endpoint>/<bucket>/<key>` URLs instead of `<bucket>.<endpoint>/<key>` (most self-hosted services). */
  readonly forcePathStyle?: boolean;
  /**
   * The endpoint clients reach when it differs from the service's (MinIO at http://minio:9000 inside
   * a compose network, http://localhost:9000 outside): presigned URLs are signed for it, since the
   * host is part of the signature.
   */
  readonly publicEndpoint?: string;
  /**
   * Upload URLs require `If-None-Match: *` (signed, so a PUT without it is refused): the bucket
   * then refuses a PUT onto an existing object with 412 (AWS S3 since 2024-08, MinIO, R2). Default
   * true; turn off for a service without conditional writes.
   */
  readonly conditionalUploads?: boolean;
}

export function createS3ObjectStore(options: S3ObjectStoreOptions): ObjectStore {
  const { bucket } = options;
  if ((options.accessKeyId === undefined) !== (options.secretAccessKey === undefined)) {
    throw new RangeError("give both accessKeyId and secretAccessKey, or neither");
  }
  const config: S3ClientConfig = {
    region: options.region,
    forcePathStyle: options.forcePathStyle ?? false,
    // Checksums only where S3 demands them: the newer "when supported" default puts a checksum of an
    // empty body into presigned PUT URLs (so real uploads fail) and is not understood by many
    // S3-compatible services.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  };
  if (options.endpoint !== undefined) config.endpoint = options.endpoint;
  if (options.accessKeyId !== undefined && options.secretAccessKey !== undefined) {
    config.credentials = { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey };
  }
  const client = new S3Client(config);
  // Signs only (no request is sent through it).
  const signer = options.publicEndpoint
    ? new S3Client({ ...config, endpoint: options.publicEndpoint })
    : client;

  const expiresAt = (expiresInSec: number) => new Date(Date.now() + expiresInSec * 1000);
  const conditional = options.conditionalUploads ?? true;

  return {
    kind: "s3",

    async presignUpload(key, { contentType, maxBytes, expiresInSec }) {
      assertValidObjectKey(key);
      assertPresignOptions({ contentType, maxBytes, expiresInSec });
      const command = new PutObjectCommand({
        Bucket: bucket,
        Key: key,
        ContentType: contentType,
        ...(conditional ? { IfNoneMatch: "*" } : {}),
      });
      // The presigner leaves Content-Type out of the signature unless told to sign it; signed, S3
      // refuses a PUT with any other Content-Type (and, conditional, one without If-None-Match). A
      // presigned PUT cannot cap the body size (only a presigned POST policy can), so `maxBytes` is
      // NOT enforced here: consumers must re-check the size when reading (getToFile does, while
      // streaming).
      const url = await getSignedUrl(signer, command, {
        expiresIn: expiresInSec,
        signableHeaders: new Set(conditional ? ["content-type", "if-none-match"] : ["content-type"]),
      });
      return {
        url,
        expiresAt: expiresAt(expiresInSec),
        headers: { "Content-Type": contentType, ...(conditional ? { "If-None-Match": "*" } : {}) },
      };
    },

    async presignDownload(key, { expiresInSec, downloadName }) {
      assertValidObjectKey(key);
      assertPresignOptions({ expiresInSec, downloadName });
      const command = new GetObjectCommand({
        Bucket: bucket,
        Key: key,
        ...(downloadName !== undefined
          ? { ResponseContentDisposition: attachmentDisposition(downloadName) }
          : {}),
      });
      const url = await getSignedUrl(signer, command, { expiresIn: expiresInSec });
      return { url, expiresAt: expiresAt(expiresInSec) };
    },

    async putFile(key, path, contentType) {
      assertValidObjectKey(key);
      const { size } = await stat(path);
      // One PutObject (atomic on S3; limit 5 GB, far above the service's objects). Multipart would
      // need @aws-sdk/lib-storage.
      const body = createReadStream(path);
      try {
        await client.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key: key,
            Body: body,
            ContentLength: size,
            ContentType: contentType,
          }),
        );
      } finally {
        body.destroy();
      }
    },

    async getToFile(key, destination, maxBytes) {
      assertValidObjectKey(key);
      let response;
      try {
        response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      } catch (error) {
        if (isNotFound(error)) throw new ObjectNotFoundError(key);
        throw error;
      }
      const body = response.Body;
      if (!(body instanceof Readable)) throw new Error("S3 GetObject returned no readable body");
      try {
        if (response.ContentLength !== undefined && response.ContentLength > maxBytes) {
          throw new ObjectTooLargeError(maxBytes);
        }
        // Counted while streaming too: the declared length is the server's word, the cap is ours.
        const tmp = tempPathFor(resolve(destination));
        const bytes = await streamToNewFile(body, tmp, maxBytes);
        try {
          await rename(tmp, destination);
        } catch (error) {
          await rm(tmp, { force: true });
          throw error;
        }
        return { bytes };
      } finally {
        // Aborts the download when we stopped early; a no-op after a complete read.
        body.destroy();
      }
    },

    async exists(key) {
      assertValidObjectKey(key);
      try {
        await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
        return true;
      } catch (error) {
        if (isNotFound(error)) return false;
        throw error;
      }
    },

    async delete(key) {
      assertValidObjectKey(key);
      // Idempotent on S3: deleting a missing key succeeds.
      await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
    },

    async ensureExpiryRules(rules: readonly ExpiryRule[]) {
      let existing: LifecycleRule[] = [];
      try {
        const current = await client.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket }));
        existing = current.Rules ?? [];
      } catch (error) {
        if (!(error instanceof S3ServiceException && error.name === "NoSuchLifecycleConfiguration"))
          throw error;
      }
      const ours = new Set(rules.map((rule) => rule.id));
      // The PUT replaces the whole configuration: the operator's own rules are carried over.
      await client.send(
        new PutBucketLifecycleConfigurationCommand({
          Bucket: bucket,
          LifecycleConfiguration: {
            Rules: [
              ...existing.filter((rule) => !ours.has(rule.ID ?? "")),
              ...rules.map((rule): LifecycleRule => ({
                ID: rule.id,
                Status: "Enabled",
                Filter: { Prefix: rule.prefix },
                Expiration: { Days: rule.days },
              })),
            ],
          },
        }),
      );
    },

    async close() {
      client.destroy();
      if (signer !== client) signer.destroy();
    },
  };
}

function isNotFound(error: unknown): boolean {
  if (!(error instanceof S3ServiceException)) return false;
  return error.name === "NoSuchKey" || error.name === "NotFound" || error.$metadata.httpStatusCode === 404;
}
