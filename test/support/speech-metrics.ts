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
