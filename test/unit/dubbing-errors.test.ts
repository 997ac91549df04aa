import { describe, expect, it } from "vitest";
import { withoutPaths } from "../../src/dubbing/media/errors.js";

describe("withoutPaths", () => {
  it("cuts absolute paths (plain or file:) to their last component", () => {
    expect(
      withoutPaths(
        "source is not a media file ffmpeg can read (file:/srv/relay/work/job-1-x/source: Invalid data found)",
      ),
    ).toBe("source is not a media file ffmpeg can read (source: Invalid data found)");
    expect(withoutPaths("ENOENT: no such file or directory, open '/srv/relay/work/job-1/speech.raw'")).toBe(
      "ENOENT: no such file or directory, open 'speech.raw'",
    );
    expect(withoutPaths("/usr/bin/ffmpeg exited with status 1")).toBe("ffmpeg exited with status 1");
    expect(withoutPaths("[/srv/a/b] path=/var/lib/relay/")).toBe("[b] path=relay");
  });

  it("leaves URLs, ratios and lone slashes alone", () => {
    for (const text of [
      "the source answered HTTP 404 for https://example.com/videos/a.mp4",
      "3/4 of the input, a / b",
    ]) {
      expect(withoutPaths(text)).toBe(text);
    }
  });
});
