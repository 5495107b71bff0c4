// BullMQ's side of bench/slow_jobs.py: one worker process whose job awaits SLEEP_MS
// (an HTTP call's wait) and returns a small object (kept as the job's return value,
// BullMQ's default). Env: REDIS_URL, CONCURRENCY (1000), SLEEP_MS (50), QUEUE (slow),
// BULLMQ_DIR (the peer harness' bullmq/ folder, where `npm ci` put node_modules).
const path = require('path');
const dir = process.env.BULLMQ_DIR || '/tmp/fleet-peers/bullmq';
const { Worker } = require(path.join(dir, 'node_modules', 'bullmq'));
const IORedis = require(path.join(dir, 'node_modules', 'ioredis'));

const url = process.env.REDIS_URL || 'redis://127.0.0.1:6390/0';
const concurrency = parseInt(process.env.CONCURRENCY || '1000', 10);
const sleepMs = parseInt(process.env.SLEEP_MS || '50', 10);
const connection = new IORedis(url, { maxRetriesPerRequest: null });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const worker = new Worker(process.env.QUEUE || 'slow', async (job) => {
  await sleep(sleepMs);
  return { ok: true, i: job.data.i };
}, { connection, concurrency });
worker.on('error', (e) => console.error('worker error', e));

async function shutdown() {
  try { await worker.close(); } catch (e) { /* stopping */ }
  connection.disconnect();
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
