import { readFile } from "node:fs/promises";

export interface DubbingAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/**
 * The dubbing REST API as the tests drive it over real HTTP with one API key: JSON requests, an
 * upload through the presigned URL, and polling a job until it ends. Tests that check the upload
 * steps themselves (dubbing-api.test.ts) make their requests by hand.
 */
export function dubbingClient(baseUrl: string, key: string) {
  async function request(method: string, route: string, body?: unknown): Promise<DubbingAnswer> {
    const response = await fetch(new URL(route, baseUrl), {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  return {
    request,

    /** Uploads `file` through a presigned URL; returns the `source_url` a job can name. */
    async upload(file: string, contentType = "video/mp4"): Promise<string> {
      const { status, body } = await request("POST", "/api/dubbing/upload-url", {
        filename: `upload.${contentType.split("/")[1]}`,
        content_type: contentType,
      });
      if (status !== 200) throw new Error(`upload URL refused: HTTP ${status} ${JSON.stringify(body)}`);
      const put = await fetch(body.upload_url as string, {
        method: "PUT",
        headers: body.upload_headers as Record<string, string>,
        body: await readFile(file),
      });
      if (!put.ok) throw new Error(`upload PUT failed: HTTP ${put.status}`);
      return body.source_url as string;
    },

    /** Polls the job until it is completed or failed; returns its last status. */
    async finished(jobId: string): Promise<Record<string, unknown>> {
      for (;;) {
        const { body: job } = await request("GET", `/api/dubbing/jobs/${jobId}`);
        if (job.status === "completed" || job.status === "failed") return job;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
  };
}
