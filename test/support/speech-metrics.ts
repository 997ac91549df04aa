/**
 * Seconds of translated speech a running service has sent, by speed against the voice's natural
 * rate: its `relay_speech_seconds_total{speed}` on /metrics (pacing, src/pipeline/pacing.ts).
 */
export async function speechBySpeed(baseUrl: string): Promise<Map<number, number>> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const spoken = new Map<number, number>();
  for (const [, speed, seconds] of text.matchAll(/^relay_speech_seconds_total\{speed="([\d.]+)"\} (\S+)$/gmu))
    spoken.set(Number(speed), Number(seconds));
  return spoken;
}

/**
 * The speeds chosen between two readings of `speechBySpeed`: the mean weighted by seconds spoken,
 * and the fastest (1 when nothing was spoken).
 */
export function speedsChosen(
  before: Map<number, number>,
  after: Map<number, number>,
): { mean: number; fastest: number } {
  let seconds = 0;
  let weighted = 0;
  let fastest = 1;
  for (const [speed, total] of after) {
    const spoken = total - (before.get(speed) ?? 0);
    if (spoken <= 0) continue;
    seconds += spoken;
    weighted += speed * spoken;
    fastest = Math.max(fastest, speed);
  }
  return { mean: seconds > 0 ? weighted / seconds : 1, fastest };
}
