import type { FastifyInstance } from "fastify";
import { jobRoutes } from "./jobs.js";
import type { DubbingRouteOptions } from "./options.js";
import { submissionRoutes } from "./submission.js";

/**
 * The dubbing half of the REST interface: upload URLs and job creation (submission.ts), jobs,
 * results and subtitles (jobs.ts; subtitles are beyond the spec).
 */

export async function dubbingRoutes(app: FastifyInstance, options: DubbingRouteOptions): Promise<void> {
  // In this order in the API reference: upload, create, list, status, result, subtitles.
  await submissionRoutes(app, options);
  await jobRoutes(app, options);
}
