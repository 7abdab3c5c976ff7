# The hub's image: the chart's own (jupyterhub chart 4.4.0, which runs jupyterhub 5.5.0) with the
# course's pins of jupyterhub, KubeSpawner and the idle culler from requirements.txt, so the hub and the
# single-user servers share one JupyterHub major version (Z2JH's rule for custom images) and the hub runs
# the KubeSpawner tests/classroom/test_z2jh_recipe.py renders pods with.
#   docker build -f deploy/z2jh/hub.Dockerfile -t REGISTRY/rlhf-course-hub:4.4.0-jh6.1.1 deploy/z2jh
FROM quay.io/jupyterhub/k8s-hub:4.4.0

# --no-deps: the chart's image already holds every other dependency of these three at versions they accept
# (checked against the chart's images/hub/requirements.txt at 4.4.0), except jupyterhub 6's aiodns and its
# pycares, pinned as in requirements.txt; pip check fails the build otherwise.
USER root
RUN pip install --no-cache-dir --no-deps jupyterhub==6.1.1 jupyterhub-kubespawner==7.1.0 \
        jupyterhub-idle-culler==2.0.0 aiodns==4.0.4 pycares==5.2.1 \
 && pip check
USER jovyan
