/* The core's worker pool: runs a backend's synchronous rw on worker threads
 * for backends that have no asynchronous engine of their own (ref). The
 * queue is bounded so a submitter that outruns the workers waits for room
 * (back-pressure) instead of failing or growing memory without limit. */
#include <sched.h>
#include <stdlib.h>

#include "ods.h"

struct ods_pool {
	pthread_mutex_t lock;
	pthread_cond_t work;  /* workers wait for a request */
	pthread_cond_t room;  /* submitters wait for room */
	struct ods_io *head, *tail;
	unsigned queued, capacity;
	bool stop;
	unsigned nthreads;
	pthread_t *threads;
};

void ods_pin_worker(const struct ods_config *cfg, unsigned i)
{
	if (!cfg->cpu_mask)
		return;
	unsigned bits = (unsigned)__builtin_popcountll(cfg->cpu_mask), want = i % bits, seen = 0;
	for (int cpu = 0; cpu < 64; cpu++) {
		if (!(cfg->cpu_mask >> cpu & 1))
			continue;
		if (seen++ == want) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			/* best effort: a CPU outside our cpuset just fails */
			pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
			return;
		}
	}
}

struct worker_arg {
	struct ods_pool *p;
	unsigned index;
	const struct ods_config *cfg;
};

static void *worker(void *arg)
{
	struct worker_arg wa = *(struct worker_arg *)arg;
	struct ods_pool *p = wa.p;
	free(arg);
	ods_pin_worker(wa.cfg, wa.index);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->head && !p->stop)
			pthread_cond_wait(&p->work, &p->lock);
		struct ods_io *io = p->head;
		if (!io)
			break; /* stop, and the queue is drained */
		p->head = io->next;
		if (!p->head)
			p->tail = NULL;
		if (--p->queued < p->capacity)
			pthread_cond_signal(&p->room);
		pthread_mutex_unlock(&p->lock);

		ssize_t r = atomic_load_explicit(&io->cancelled, memory_order_acquire) ? -ECANCELED
											: ods_drv.be->rw(io);
		ods_io_complete(io, r);

		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct ods_pool *ods_pool_create(unsigned threads, unsigned capacity, const struct ods_config *cfg)
{
	struct ods_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->threads = calloc(threads, sizeof(*p->threads));
	if (!p->threads) {
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->room, NULL);
	p->capacity = capacity;
	for (unsigned i = 0; i < threads; i++) {
		struct worker_arg *wa = malloc(sizeof(*wa));
		if (!wa)
			break;
		wa->p = p;
		wa->index = i;
		wa->cfg = cfg;
		if (ods_thread_start(&p->threads[i], worker, wa)) {
			free(wa);
			break;
		}
		p->nthreads++;
	}
	if (p->nthreads != threads) {
		ods_pool_destroy(p);
		return NULL;
	}
	return p;
}

void ods_pool_destroy(struct ods_pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->room);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
}

void ods_pool_push(struct ods_pool *p, struct ods_io *io, bool force)
{
	io->next = NULL;
	pthread_mutex_lock(&p->lock);
	while (!force && p->queued >= p->capacity)
		pthread_cond_wait(&p->room, &p->lock);
	if (p->tail)
		p->tail->next = io;
	else
		p->head = io;
	p->tail = io;
	p->queued++;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->lock);
}
