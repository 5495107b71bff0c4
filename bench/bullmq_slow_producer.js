// Enqueues N jobs for bench/bullmq_slow_worker.js with queue.addBulk (chunks of
// 1,000); the timing that matters is the drain's. Env as the worker's.
const path = require('path');
const dir = process.env.BULLMQ_DIR || '/tmp/fleet-peers/bullmq';
const { Queue } = require(path.join(dir, 'node_modules', 'bullmq'));
const IORedis = require(path.join(dir, 'node_modules', 'ioredis'));

(async () => {
  const n = parseInt(process.argv[2], 10);
  const connection = new IORedis(process.env.REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue(process.env.QUEUE || 'slow', { connection });
  await queue.waitUntilReady();
  for (let s = 0; s < n; s += 1000) {
    const jobs = [];
    for (let i = s; i < Math.min(n, s + 1000); i++) jobs.push({ name: 'slow', data: { i } });
    await queue.addBulk(jobs);
  }
  const counts = await queue.getJobCounts('completed');
  console.log(JSON.stringify({ queued: n, completed: counts.completed }));
  await queue.close();
  connection.disconnect();
})().catch((e) => { console.error(e); process.exit(1); });
