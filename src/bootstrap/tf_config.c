/*
 * tf_config.c - TensorFlow's TF_CONFIG, read with jansson:
 *
 *   {"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"],
 *                "ps": ["h3:2222"], "evaluator": ["h4:2222"]},
 *    "task": {"type": "worker", "index": 1}}
 *
 * The chief (TF 1's "master") is worker 0 of the ring and the workers
 * follow it, so the ring's peer list is chief + worker, in that order.
 * Parameter servers have nothing to do in a ring: listed ones are ignored
 * (saying so once), and a task that is one is told not to start ringd. An
 * evaluator task becomes the evaluator role.
 */
#include "ring_build.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "errors.h"
#include "launch_int.h"

#define TF_BAD(...) ring_error_set(RING_ERR_INVALID, "TF_CONFIG: " __VA_ARGS__)

/* The host:port list cluster.<job>, or NULL when absent; *status set when malformed. */
static json_t *tf_job(json_t *cluster, const char *job, ring_status_t *status)
{
    json_t *list = json_object_get(cluster, job);
    size_t i;
    json_t *entry;

    if (list == NULL)
        return NULL;
    if (!json_is_array(list)) {
        *status = TF_BAD("cluster.%s must be a list of \"host:port\" strings", job);
        return NULL;
    }
    json_array_foreach(list, i, entry) {
        const char *s = json_string_value(entry);
        if (s == NULL || s[0] == '\0' || strchr(s, ',') != NULL) {
            *status = TF_BAD("cluster.%s[%zu] must be a \"host:port\" string", job, i);
            return NULL;
        }
    }
    return list;
}

/* Append the addresses of list to l->peers. */
static ring_status_t tf_append(ring_launch_t *l, json_t *list)
{
    size_t i, used = strlen(l->peers);
    json_t *entry;

    json_array_foreach(list, i, entry) {
        int n = snprintf(l->peers + used, sizeof(l->peers) - used, "%s%s", used ? "," : "",
                         json_string_value(entry));
        if (n < 0 || (size_t)n >= sizeof(l->peers) - used)
            return TF_BAD("the cluster's address list is longer than %zu bytes",
                          sizeof(l->peers) - 1);
        used += (size_t)n;
    }
    return RING_OK;
}

static ring_status_t tf_parse(json_t *root, ring_launch_t *l)
{
    ring_status_t status = RING_OK;
    json_t *cluster, *task, *chief, *worker, *ps, *jtype, *jindex;
    const char *type;
    size_t nchief, nworker;
    json_int_t index = 0;

    if (!json_is_object(root))
        return TF_BAD("the top level must be an object with \"cluster\" and \"task\"");
    cluster = json_object_get(root, "cluster");
    task = json_object_get(root, "task");
    if (!json_is_object(cluster))
        return TF_BAD("\"cluster\" is missing or not an object");
    if (!json_is_object(task))
        return TF_BAD("\"task\" is missing or not an object");
    jtype = json_object_get(task, "type");
    type = json_string_value(jtype);
    if (type == NULL)
        return TF_BAD("task.type is missing or not a string");
    jindex = json_object_get(task, "index");
    if (jindex != NULL) {
        if (!json_is_integer(jindex) || json_integer_value(jindex) < 0)
            return TF_BAD("task.index must be a whole number >= 0");
        index = json_integer_value(jindex);
    }
    chief = tf_job(cluster, "chief", &status);
    if (chief == NULL && status == RING_OK)
        chief = tf_job(cluster, "master", &status);
    worker = tf_job(cluster, "worker", &status);
    ps = tf_job(cluster, "ps", &status);
    if (status != RING_OK)
        return status;
    nchief = chief != NULL ? json_array_size(chief) : 0;
    nworker = worker != NULL ? json_array_size(worker) : 0;
    if (nchief > 1)
        return TF_BAD("cluster.chief lists %zu tasks; there can be one", nchief);
    if (nchief + nworker == 0)
        return TF_BAD("the cluster has no chief and no worker: nobody to form a ring");
    if (nchief + nworker > 65536)
        return TF_BAD("%zu workers is more than a ring of 65536", nchief + nworker);
    if (ps != NULL && json_array_size(ps) > 0)
        snprintf(l->note, sizeof(l->note), "TF_CONFIG lists %zu parameter server(s) "
                 "(cluster.ps): a ring needs none, ringd ignores them", json_array_size(ps));

    if (strcmp(type, "ps") == 0)
        return TF_BAD("this task is a parameter server (task.type \"ps\"); ringd's ring has "
                      "none: start ringd only for the chief, workers and the evaluator");
    if (strcmp(type, "chief") == 0 || strcmp(type, "master") == 0) {
        if (nchief == 0 || index != 0)
            return TF_BAD("task is %s %lld but cluster.%s has %zu entries", type,
                          (long long)index, type, nchief);
        l->rank = 0;
    } else if (strcmp(type, "worker") == 0) {
        if ((size_t)index >= nworker)
            return TF_BAD("task is worker %lld but cluster.worker has %zu entries",
                          (long long)index, nworker);
        l->rank = (int)(nchief + (size_t)index);
    } else if (strcmp(type, "evaluator") == 0) {
        snprintf(l->role, sizeof(l->role), "evaluator");
        snprintf(l->role_var, sizeof(l->role_var), "TF_CONFIG task.type");
    } else {
        return TF_BAD("task.type \"%s\" is none of chief, worker, evaluator (or ps)", type);
    }
    snprintf(l->launcher, sizeof(l->launcher), "tf_config");
    l->world_size = (int)(nchief + nworker);
    snprintf(l->world_var, sizeof(l->world_var), "TF_CONFIG cluster: %zu chief + %zu worker",
             nchief, nworker);
    if (l->rank >= 0)
        snprintf(l->rank_var, sizeof(l->rank_var), "TF_CONFIG task: %s %lld", type,
                 (long long)index);
    if (chief != NULL)
        RING_CHECK(tf_append(l, chief));
    if (worker != NULL)
        RING_CHECK(tf_append(l, worker));
    snprintf(l->peers_var, sizeof(l->peers_var), "TF_CONFIG cluster.chief + cluster.worker");
    return RING_OK;
}

ring_status_t ring_tf_config_parse(const char *text, ring_launch_t *l)
{
    json_error_t err;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    ring_status_t status;

    if (root == NULL)
        return TF_BAD("not valid JSON: %s (line %d, column %d)", err.text, err.line,
                      err.column);
    status = tf_parse(root, l);
    json_decref(root);
    return status;
}
