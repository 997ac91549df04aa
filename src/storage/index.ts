import { createLocalObjectStore, type LocalObjectStore, type LocalObjectStoreOptions } from "./local.js";
import { createS3ObjectStore, type S3ObjectStoreOptions } from "./s3.js";
import type { ObjectStore } from "./types.js";

export * from "./types.js";
export {
  IncompleteTransferError,
  InvalidObjectKeyError,
  MAX_OBJECT_BYTES,
  MAX_PRESIGN_SECONDS,
  assertValidObjectKey,
  objectKeyProblem,
} from "./common.js";
export { createLocalObjectStore, type LocalObjectStore, type LocalObjectStoreOptions } from "./local.js";
export { localStorageRoutes, type LocalStorageRouteOptions } from "./local-routes.js";
export { createS3ObjectStore, type S3ObjectStoreOptions } from "./s3.js";

export type ObjectStoreConfig =
  ({ readonly kind: "local" } & LocalObjectStoreOptions) | ({ readonly kind: "s3" } & S3ObjectStoreOptions);

/**
 * The store for `config`. With `kind: "local"` the app must also register `localStorageRoutes`
 * (with this store) so its presigned URLs resolve.
 */
export function createObjectStore(
  config: { readonly kind: "local" } & LocalObjectStoreOptions,
): LocalObjectStore;
export function createObjectStore(config: ObjectStoreConfig): ObjectStore;
export function createObjectStore(config: ObjectStoreConfig): ObjectStore {
  switch (config.kind) {
    case "local":
      return createLocalObjectStore(config);
    case "s3":
      return createS3ObjectStore(config);
  }
}
